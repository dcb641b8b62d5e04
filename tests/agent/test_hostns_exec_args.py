"""``_hostns_exec``'s command line, parsed by hand (argparse costs start-up before every rank):
every option the agent passes, the command after ``--`` or from the first plain word, and a
clear one-line refusal (exit status 2, as argparse's) for anything else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainops._hostns_exec import UsageError, parse


def test_every_option_the_agent_passes() -> None:
    args = parse(
        [
            "--hold", "--die-with-parent", "12", "--hostname", "algo-1", "--hosts-file", "/h",
            "--resolve", "algo-1", "--resolve", "algo-2", "--bind", "/a", "/b", "ro",
            "--graft", "/ns", "7", "/c", "/d", "rw", "--opt-ml", "/tree", "--mask", "/m",
            "--keep", "/m/k", "--keep-ro", "/m/r", "--join", "5", "--ns-inode", "9",
            "--expect-entries", "/e", "--", "python", "--version",
        ]
    )  # fmt: skip
    assert (args.hold, args.probe, args.die_with_parent, args.join, args.ns_inode) == (
        True, False, 12, 5, 9,
    )  # fmt: skip
    assert (args.hostname, args.hosts_file, args.opt_ml, args.expect_entries) == (
        "algo-1", "/h", "/tree", "/e",
    )  # fmt: skip
    assert args.resolve == ["algo-1", "algo-2"]
    assert args.bind == [["/a", "/b", "ro"]]
    assert args.graft == [["/ns", "7", "/c", "/d", "rw"]]
    assert (args.mask, args.keep, args.keep_ro) == (["/m"], ["/m/k"], ["/m/r"])
    assert args.command == ["python", "--version"]  # options after the command are its own


def test_the_command_starts_at_the_first_plain_word() -> None:
    assert parse(["--probe"]).command == []
    assert parse(["echo", "--hold"]).command == ["echo", "--hold"]
    assert parse(["--", "--hold"]).command == ["--hold"]
    assert not parse(["echo", "--hold"]).hold


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--frobnicate"], "unrecognized argument: --frobnicate"),
        (["--hostname"], "argument --hostname: expected 1 argument(s)"),
        (["--bind", "/a", "/b"], "argument --bind: expected 3 argument(s)"),
        (["--join", "one"], "argument --join: invalid int value: 'one'"),
        (["--die-with-parent", "1e3", "--", "true"], "invalid int value: '1e3'"),
    ],
)
def test_a_bad_command_line_is_refused_clearly(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse(argv)


@pytest.mark.parametrize("argv", [["--nope", "--", "true"], ["--hostname"], ["--join", "x"], []])
def test_the_program_says_so_in_one_line_and_exits_2(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainops._hostns_exec", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("python -m trainops._hostns_exec: error: ")


def test_it_starts_light_no_enum_no_idna_even_after_a_name_look_up() -> None:
    """Run as the agent runs it (by path, ``python -S``): neither ``signal``'s enums nor the
    idna codec (``str`` host names) are imported, even once a job host name was looked up."""
    from trainops import _hostns_exec

    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import _hostns_exec as h; "
        "h._wait_for_names(['localhost']); "
        "print(sorted({'enum', 'encodings.idna', 'typing'} & set(sys.modules)))"
    )
    here = str(Path(_hostns_exec.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe, here], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_the_metric_worker_imports_no_typing() -> None:
    """It runs once per job (``python -I -S``, by path): ``typing`` is for the type checker."""
    from trainops.agent.reporting import _scrape_worker

    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import _scrape_worker; "
        "print(sorted({'site', 'typing'} & set(sys.modules)))"
    )
    here = str(Path(_scrape_worker.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe, here], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
