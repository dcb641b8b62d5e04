"""The ``trainops`` command line: a small, frozen set of subcommands and flags.

New knobs go into the job spec, not into new flags (tests/cli/test_surface.py guards this).
Handlers are referenced by name and imported on use, so ``trainops --help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
from typing import TypeAlias

from trainops._version import __version__

__all__ = ["PRIMARY_STATUSES", "build_parser"]

PRIMARY_STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")
DEFAULT_PORT = 8470
# The rates a cost question may ask about: the server's bounds too (server/routes/_reports.py).
MIN_INTERRUPTIONS_PER_HOUR = 0.001
MAX_INTERRUPTIONS_PER_HOUR = 3600.0
NAME_HELP = "the job's name, a start of it that no other job's name has, or latest"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainops",
        description="Run SageMaker-style training jobs locally: submit, follow, inspect, stop.",
    )
    parser.add_argument("--version", action="version", version=f"trainops {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(commands)
    _add_submit(commands)
    _add_jobs(commands)
    _add_describe(commands)
    _add_logs(commands)
    _add_metrics(commands)
    _add_stop(commands)
    _add_chaos(commands)
    _add_report(commands)
    _add_cost(commands)
    _add_cluster(commands)
    _add_study(commands)
    _add_server(commands)
    _add_ui(commands)
    _add_pack(commands)
    _add_tune(commands)
    _add_tuning(commands)
    return parser


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _command(
    commands: Commands, name: str, handler: str, help_text: str
) -> argparse.ArgumentParser:
    sub = commands.add_parser(name, help=help_text, description=help_text)
    sub.set_defaults(handler=handler)
    return sub


def _add_run(commands: Commands) -> None:
    sub = _command(
        commands,
        "run",
        "run",
        "Submit a job spec, follow its status and log, exit with its outcome.",
    )
    sub.add_argument("spec", metavar="SPEC", help="job spec (YAML)")
    sub.add_argument(
        "--ui",
        action="store_true",
        help="print the web UI's address and keep the embedded server (and the UI) up after the "
        "job, until Ctrl-C",
    )


def _add_submit(commands: Commands) -> None:
    sub = _command(
        commands, "submit", "submit", "Submit a job spec to the configured server; print its name."
    )
    sub.add_argument("spec", metavar="SPEC", help="job spec (YAML)")


def _add_jobs(commands: Commands) -> None:
    sub = _command(commands, "jobs", "jobs", "List jobs, newest first.")
    sub.add_argument(
        "--status", action="extend", nargs="+", choices=PRIMARY_STATUSES, metavar="S",
        help=f"only jobs with this primary status ({', '.join(PRIMARY_STATUSES)}); repeatable",
    )  # fmt: skip
    sub.add_argument("--name-contains", metavar="X", help="only jobs whose name contains X")
    sub.add_argument("--limit", type=_limit, default=50, metavar="N", help="at most N (1-1000)")


def _add_cluster(commands: Commands) -> None:
    _command(
        commands, "cluster", "cluster", "Show the backend's machines and what is free on each."
    )


def _add_study(commands: Commands) -> None:
    sub = _command(
        commands,
        "study",
        "study",
        "Run a job spec over resource configurations; print how it scaled, plot it.",
    )
    sub.add_argument("spec", metavar="STUDY", help="study spec (YAML): job, configurations, ...")


def _add_describe(commands: Commands) -> None:
    sub = _command(
        commands,
        "describe",
        "describe",
        "Print a job's description as JSON: DescribeTrainingJob's shape, trainops' own under "
        "Trainops.",
    )
    sub.add_argument("name", metavar="NAME", help=NAME_HELP)
    sub.add_argument(
        "--rest",
        action="store_true",
        help="the REST API's describe instead (GET /api/v1/jobs/NAME, docs/api.md)",
    )


def _add_logs(commands: Commands) -> None:
    sub = _command(commands, "logs", "logs", "Print a job's log (every host, prefixed).")
    sub.add_argument("name", metavar="NAME", help=NAME_HELP)
    sub.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    sub.add_argument("--host", metavar="H", help="only this host (algo-1, algo-2, ...)")


def _add_metrics(commands: Commands) -> None:
    sub = _command(commands, "metrics", "metrics", "Print a job's metric time series.")
    sub.add_argument("name", metavar="NAME", help=NAME_HELP)
    sub.add_argument("--name", dest="metric", metavar="M", help="only the metric called M")
    sub.add_argument("--csv", action="store_true", help="CSV: timestamp,metric_name,value,host")


def _add_stop(commands: Commands) -> None:
    sub = _command(
        commands, "stop", "stop", "Stop a job (SIGTERM, then SIGKILL after its grace period)."
    )
    sub.add_argument("name", metavar="NAME", help=NAME_HELP)
    sub.add_argument("--wait", action="store_true", help="wait until it has stopped")


def _add_chaos(commands: Commands) -> None:
    sub = _command(
        commands,
        "chaos",
        "chaos",
        "Rehearse a spot interruption: 'interrupt' stops a running spot job's hosts with a "
        "notice, as a spot reclaim would; it waits for capacity, then resumes from its checkpoint.",
    )
    sub.add_argument("action", metavar="ACTION", choices=("interrupt",), help="interrupt")
    sub.add_argument("name", metavar="NAME", help=NAME_HELP)
    sub.add_argument(
        "--host", action="append", metavar="H", help="the host reclaimed (repeatable; default all)"
    )
    sub.add_argument(
        "--gap", type=float, default=0.0, metavar="S", help="seconds without capacity (Pending)"
    )
    sub.add_argument(
        "--notice", type=float, metavar="S", help="SIGTERM to SIGKILL (default: the grace period)"
    )


def _add_report(commands: Commands) -> None:
    sub = _command(
        commands,
        "report",
        "report",
        "Write a job's profiler report (HTML, and its data as JSON beside it) and open it; "
        "works while the job runs.",
    )
    sub.add_argument("name", metavar="NAME", help=NAME_HELP)
    sub.add_argument(
        "-o", "--output", metavar="PATH",
        help="the HTML file to write (default: ./<job>-profiler-report.html)",
    )  # fmt: skip
    sub.add_argument("--json", action="store_true", help="print the report's data as JSON instead")
    sub.add_argument("--no-open", action="store_true", help="do not open it in a browser")


def _add_cost(commands: Commands) -> None:
    sub = _command(
        commands,
        "cost",
        "cost",
        "Print a job's cost advice: on-demand and spot cost, what its interruptions cost, and "
        "the checkpoint interval that costs least; works while the job runs.",
    )
    sub.add_argument("name", metavar="NAME", help=NAME_HELP)
    sub.add_argument(
        "--interruptions-per-hour", type=_interruption_rate, metavar="R",
        help="the interruption rate to advise a checkpoint interval for (default: this job's)",
    )  # fmt: skip
    sub.add_argument(
        "--checkpoint-seconds", type=_checkpoint_seconds, metavar="C",
        help="seconds writing a checkpoint takes the script (default: as the job's checkpoint "
        "records measured it)",
    )  # fmt: skip
    sub.add_argument("--json", action="store_true", help="print the advice's data as JSON")


def _add_server(commands: Commands) -> None:
    sub = _command(commands, "server", "server", "Run the control plane and REST API.")
    sub.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sub.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    sub.add_argument(
        "--backend",
        metavar="NAME",
        help="where host agents run (default: 'backend:' in config.yaml, else local)",
    )
    sub.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster of --backend ray (HOST:PORT of its head, or auto)",
    )
    sub.add_argument(
        "--s3",
        action="store_true",
        help="start and supervise an S3 server (SeaweedFS) on 127.0.0.1 as the default object "
        "store (also: s3.serve in config.yaml, TRAINOPS_S3_SERVE=1)",
    )


def _add_ui(commands: Commands) -> None:
    sub = _command(
        commands,
        "ui",
        "ui",
        "Serve the web UI (and the API) on this home on 127.0.0.1 and print a one-time login "
        "link; with the home's server running already, print its address.",
    )
    sub.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")


def _add_pack(commands: Commands) -> None:
    sub = _command(
        commands,
        "pack",
        "pack",
        "Pack a directory or prefix of many small files into shards (RecordIO, TFRecord or "
        "trainops shards) with an index; re-running continues an interrupted pack.",
    )
    sub.add_argument("src", metavar="SRC", help="a directory, file:// or s3:// prefix")
    sub.add_argument("dest", metavar="DEST", help="a new directory, file:// or s3:// prefix")
    sub.add_argument(
        "--format", default="shards", metavar="FORMAT",
        help="recordio (.rec/.idx/.lst as im2rec), tfrecord (tf.train.Example) or shards "
        "(trainops' format for its streaming dataset; the default)",
    )  # fmt: skip
    sub.add_argument(
        "--shard-size", type=_byte_size, default=64 << 20, metavar="SIZE",
        help="target bytes per shard: 64MiB (the default), 100MB, 512k, ...",
    )  # fmt: skip
    sub.add_argument(
        "--workers", type=_workers, default=None, metavar="N",
        help="worker processes (default: one per CPU)",
    )  # fmt: skip
    sub.add_argument(
        "--labels", metavar="LST",
        help="an im2rec .lst (index<TAB>label...<TAB>path): the files, their order and labels "
        "(default: one label per top-level folder of SRC, in sorted order)",
    )  # fmt: skip


_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}


def _byte_size(text: str) -> int:
    """``64MiB`` -> 67108864, ``100MB`` / ``100M`` -> 100000000, ``4096`` -> 4096."""
    number = text.strip().rstrip("Bb")
    digits = number.rstrip("KkMmGgTtIi")
    unit = number[len(digits) :].lower()
    scale = _BINARY.get(unit) or _UNITS.get(unit)
    try:
        value = float(digits)
    except ValueError:
        value = -1.0
    if scale is None or not 1 <= value * scale < 1 << 50:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 64MiB, 100MB or 4096")
    return int(value * scale)


def _interruption_rate(text: str) -> float:
    """``--interruptions-per-hour``: from 0.001 (one in six weeks) to 3600 (one a second)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not MIN_INTERRUPTIONS_PER_HOUR <= value <= MAX_INTERRUPTIONS_PER_HOUR:  # and not NaN
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        raise argparse.ArgumentTypeError(
            f"{shown!r} is not a rate: give interruptions per hour, from 0.001 to 3600 "
            "(0.5: one every two hours)"
        )
    return value


def _checkpoint_seconds(text: str) -> float:
    """``--checkpoint-seconds``: from 0.001 to 86400."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.001 <= value <= 86400:  # and not NaN
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        raise argparse.ArgumentTypeError(
            f"{shown!r} is not a time: give the seconds writing a checkpoint takes, from 0.001 "
            "to 86400"
        )
    return value


def _workers(text: str) -> int:
    return _bounded(text, 1, 1024)


def _limit(text: str) -> int:
    return _bounded(text, 1, 1000)


def _port(text: str) -> int:
    return _bounded(text, 0, 65535)


def _bounded(text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
    return value


def _add_tune(commands: Commands) -> None:
    sub = _command(
        commands,
        "tune",
        "tune",
        "Run a tuning job: many training jobs of one spec, one best; a live table of its trials.",
    )
    sub.add_argument("tune", metavar="TUNE", help="tuning job config (YAML, docs/tuning.md)")


TUNING_ACTIONS = ("list", "describe", "stop", "best", "export", "report")


def _add_tuning(commands: Commands) -> None:
    sub = _command(
        commands,
        "tuning",
        "tuning",
        "Tuning jobs: list them; describe, stop, show the best trial of, export (CSV) or "
        "report on (plots as PNG and HTML, cost, early stopping's savings) one.",
    )
    sub.add_argument(
        "action", metavar="ACTION", choices=TUNING_ACTIONS, help=", ".join(TUNING_ACTIONS)
    )
    sub.add_argument("name", metavar="NAME", nargs="?", help="the tuning job's name")
    sub.add_argument(
        "--out", metavar="DIR", help="report: the folder to write (default: ./<NAME>-report)"
    )
