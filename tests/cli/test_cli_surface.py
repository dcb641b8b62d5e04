"""The CLI surface is frozen: new knobs belong in the job spec, not in new flags.

If this test fails because you added a flag, ask whether it should be a spec field instead
(docs/job-spec.md); change the expected surface below only for a deliberate CLI change.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from trainops.cli import ERROR_EXIT, HANDLERS, main
from trainops.cli._parser import build_parser

EXPECTED = {
    "": {"-h", "--help", "--version"},
    "run": {"-h", "--help", "SPEC", "--ui"},  # --ui: keep the embedded server's web UI up
    "submit": {"-h", "--help", "SPEC"},
    "jobs": {"-h", "--help", "--status", "--name-contains", "--limit"},
    "describe": {"-h", "--help", "NAME", "--rest"},
    "logs": {"-h", "--help", "NAME", "-f", "--follow", "--host"},
    "metrics": {"-h", "--help", "NAME", "--name", "--csv"},
    "stop": {"-h", "--help", "NAME", "--wait"},
    # a deliberate command: a rehearsal interruption of a running spot job, from outside it
    "chaos": {"-h", "--help", "ACTION", "NAME", "--host", "--gap", "--notice"},
    # the profiler report: where to write it, JSON instead, and not opening a browser (CI)
    "report": {"-h", "--help", "NAME", "-o", "--output", "--json", "--no-open"},
    # cost advice: the interruption rate and checkpoint time to advise an interval for (the
    # records cannot always measure the latter), and JSON instead of text
    "cost": {"-h", "--help", "NAME", "--interruptions-per-hour", "--checkpoint-seconds", "--json"},
    "cluster": {"-h", "--help"},  # the backend's machines: a deliberate command, no knobs
    "study": {"-h", "--help", "STUDY"},  # a deliberate command: its knobs are in the study file
    "server": {"-h", "--help", "--host", "--port", "--backend", "--ray-address", "--s3"},
    "ui": {"-h", "--help", "--port"},  # the web UI on this home (off loopback: trainops server)
    # a deliberate command: packing files is no job, so its knobs cannot live in a spec
    "pack": {"-h", "--help", "SRC", "DEST", "--format", "--shard-size", "--workers", "--labels"},
    "tune": {"-h", "--help", "TUNE"},  # a deliberate command: its knobs are in the tuning config
    # list | describe | stop | best | export | report (--out: where report writes)
    "tuning": {"-h", "--help", "ACTION", "NAME", "--out"},
}


def _surface(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    surface: dict[str, set[str]] = {"": set()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                surface[name] = _arguments(sub)
        else:
            surface[""] |= set(action.option_strings)
    return surface


def _arguments(parser: argparse.ArgumentParser) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        found |= set(action.option_strings) or {str(action.metavar)}
    return found


def test_no_new_cli_options() -> None:
    assert _surface(build_parser()) == EXPECTED


def test_every_command_has_a_handler() -> None:
    for command in set(EXPECTED) - {""}:
        operands = {
            "jobs": [],
            "server": [],
            "ui": [],
            "cluster": [],
            "pack": ["x", "y"],
            "tuning": ["list"],
            "chaos": ["interrupt", "x"],
        }
        args = build_parser().parse_args([command, *operands.get(command, ["x"])])
        assert callable(HANDLERS.lookup(args.handler))
    assert set(HANDLERS.names()) == set(EXPECTED) - {""}


def test_parsing_jobs_filters() -> None:
    args = build_parser().parse_args(
        ["jobs", "--status", "Failed", "Stopped", "--status", "Completed", "--name-contains", "dig", "--limit", "5"]
    )  # fmt: skip
    assert args.status == ["Failed", "Stopped", "Completed"]
    assert (args.name_contains, args.limit) == ("dig", 5)
    defaults = build_parser().parse_args(["jobs"])
    assert (defaults.status, defaults.name_contains, defaults.limit) == (None, None, 50)


def test_parsing_other_commands() -> None:
    parse = build_parser().parse_args
    assert parse(["logs", "j", "-f", "--host", "algo-2"]).follow is True
    metrics = parse(["metrics", "j", "--name", "loss", "--csv"])
    assert (metrics.name, metrics.metric, metrics.csv) == ("j", "loss", True)
    assert parse(["stop", "j", "--wait"]).wait is True
    report = parse(["report", "j", "-o", "r.html", "--no-open"])
    assert (report.name, report.output, report.json, report.no_open) == ("j", "r.html", False, True)
    server = parse(["server"])
    assert (server.host, server.port) == ("127.0.0.1", 8470)


@pytest.mark.parametrize(
    "argv",
    [
        ["jobs", "--status", "Running"],
        ["jobs", "--limit", "0"],
        ["jobs", "--limit", "many"],
        ["server", "--port", "70000"],
        ["run"],
        ["frobnicate"],
        [],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(argv)
    assert caught.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_tune_names_what_is_wrong_with_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, words in (
        (tmp_path / "missing.yaml", "missing.yaml: no such tuning config file"),
        (tmp_path, f"{tmp_path}: not a regular file"),  # a folder, or a device: never read
        (Path("/dev/null"), "/dev/null: not a regular file"),
    ):
        assert main(["tune", str(path)]) == ERROR_EXIT
        err = capsys.readouterr().err
        assert err.startswith("trainops: error: ") and words in err, err
        assert err.count("\n") == 1  # one line, no traceback
