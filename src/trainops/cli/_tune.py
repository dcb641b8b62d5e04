"""``trainops tune TUNE`` (run a tuning job with a live table of its trials) and
``trainops tuning list|describe|stop|best|export|report [NAME]`` (``report`` writes the
job's plots as PNG, an HTML page and the data as JSON into ``--out DIR``).

``tune`` shows the table of trials with the counts by status and the best so far: redrawn in place
on a terminal, otherwise as a line per trial that starts or ends and the table at the end (see
``_tune_table``); then why the job ended. Ctrl-C (or SIGTERM / SIGHUP) stops
the tuning job and waits for its trials to stop; a second Ctrl-C exits at once (with an
embedded server the trials then stop with it).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from trainops._errors import TrainopsError
from trainops._settings import Settings
from trainops.cli._parser import TUNING_ACTIONS
from trainops.cli._render import format_table
from trainops.cli._run import INTERRUPTED, say, signals_as_ctrl_c, silence
from trainops.cli._tune_table import (
    format_ending,
    format_trials,
    printable,
    trial_events,
    trial_states,
)
from trainops.client import (
    Client,
    analytics_rows,
    connect,
    format_time,
    read_tuning,
    submit_tuning,
)

__all__ = ["TUNING_ACTIONS", "format_trials", "tune", "tuning"]

_ENDED = ("Completed", "Stopped", "Failed")
_POLL_S = 1.0


def tune(args: argparse.Namespace) -> int:
    path = Path(args.tune)
    if not path.is_file():
        why = "not a regular file" if path.exists() else "no such tuning config file"
        raise TrainopsError(f"{path}: {why}")
    settings = Settings.load()
    with signals_as_ctrl_c(), connect(settings) as client:
        name = submit_tuning(client, path, settings)
        print(f"Submitted tuning job {name}", flush=True)
        described = _follow(client, name)
    if described is None:
        return INTERRUPTED
    status = described["HyperParameterTuningJobStatus"]
    return 0 if status == "Completed" else 1


def _follow(client: Client, name: str) -> dict[str, Any] | None:
    """Show the trials as they move until the job ends; Ctrl-C stops the job and waits. When
    nobody reads the output any more (`trainops tune tune.yaml | head`) it is as Ctrl-C: an
    embedded server's tuning job is stopped and waited for in silence (it cannot outlive the
    command, and must not be left InProgress for the next server), a server's keeps running."""
    try:
        return _watch(client, name, _Display(sys.stdout.isatty()))
    except BrokenPipeError:
        silence(sys.stdout)
    if not client.embedded:
        say(f"Detached; tuning job {name} keeps running: trainops tuning describe {name}")
        return None
    say(f"Stopping tuning job {name}: its output has no reader (Ctrl-C to exit at once)...")
    with contextlib.suppress(TrainopsError):  # it ended meanwhile
        client.stop_tuning_job(name)
    return _watch(client, name, _Display(False))


def _watch(client: Client, name: str, display: _Display) -> dict[str, Any] | None:
    """:func:`_follow` until the job ends, or a second Ctrl-C (None)."""
    stopping = False
    while True:
        try:
            described = client.describe_tuning_job(name)
            display.show(described)
            if described["HyperParameterTuningJobStatus"] in _ENDED:
                display.end(described)
                return described
            time.sleep(_POLL_S)
        except KeyboardInterrupt:
            if stopping:
                return None
            stopping = True
            print("Stopping the tuning job (Ctrl-C again to leave now)...", flush=True)
            display.forget()
            with contextlib.suppress(TrainopsError):  # it ended meanwhile: the next pass shows how
                client.stop_tuning_job(name)


class _Display:
    """On a terminal, the table redrawn in place; otherwise a line per trial that moves, and
    the table once at the end (a log or a pipe gets no repeated tables)."""

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal
        self.drawn = 0  # lines of the table on the terminal, to draw over
        self.states: dict[str, str] = {}
        self.headline = ""

    def show(self, described: dict[str, Any]) -> None:
        if self.terminal:
            # Cut to the terminal's width: a wrapped line would throw off the lines drawn over.
            width = shutil.get_terminal_size().columns
            lines = [line[:width] for line in format_trials(described).splitlines()]
            clear = f"\x1b[{self.drawn}F\x1b[J" if self.drawn else ""
            print(clear + "\n".join(lines), flush=True)
            self.drawn = len(lines)
            return
        for line in trial_events(self.states, described):
            print(line, flush=True)
        self.states = trial_states(described)

    def forget(self) -> None:
        """Leave what is drawn (a message was printed under it)."""
        self.drawn = 0

    def end(self, described: dict[str, Any]) -> None:
        if not self.terminal:
            print(format_trials(described), flush=True)
        print(format_ending(described), flush=True)


def tuning(args: argparse.Namespace) -> int:
    action, name = args.action, args.name
    if action != "list" and not name:
        raise TrainopsError(f"`trainops tuning {action}` needs the tuning job's NAME")
    with read_tuning() as reader:
        if action == "list":
            print(_list_table(reader.list_tuning_jobs(limit=1000)))
        elif action == "describe":
            print(json.dumps(reader.describe_tuning_job(name), indent=2))
        elif action == "stop":
            print(reader.stop_tuning_job(name)["HyperParameterTuningJobStatus"])
        elif action == "best":
            print(json.dumps(reader.best_tuning_trial(name), indent=2))
        elif action == "report":
            _report(name, reader.tuning_analysis(name), args.out)
        else:
            _export(reader.describe_tuning_job(name))
    return 0


def _report(name: str, data: dict[str, Any], out: str | None) -> None:
    """Write the tuning job's report (PNGs, index.html, analysis.json) into ``out``."""
    from trainops.tuning.analysis import TuningAnalysis, write_report

    folder = Path(out or f"{name}-report")
    if folder.exists() and not folder.is_dir():
        raise TrainopsError(f"{folder}: not a folder (--out names the folder to write)")
    try:
        analysis = TuningAnalysis.from_json(data)
    except (KeyError, TypeError, AttributeError) as exc:
        raise TrainopsError(
            f"the analysis of {name} is not one this trainops reads (missing or odd {exc}): "
            "is the server another version?"
        ) from None
    try:
        written = write_report(analysis, folder)
    except OSError as exc:
        raise TrainopsError(
            f"cannot write the report into {folder}: {exc.strerror or exc}"
        ) from None
    saved = analysis.early_stopping
    print(f"{name}: {len(analysis.trials)} trials, cost {analysis.total_cost_usd:.6f} "
          f"{analysis.currency}; early stopping saved {saved.saved_steps} steps "
          f"(about {saved.saved_seconds:.0f} s)")  # fmt: skip
    if not any(p.suffix == ".png" for p in written):
        print("No PNGs: the plots need matplotlib (pip install 'trainops[plot]').")
    print(f"Wrote {', '.join(p.name for p in written)} in {folder.resolve()}")


def _list_table(found: list[dict[str, Any]]) -> str:
    if not found:
        return "No tuning jobs found."
    rows = [
        [
            t["HyperParameterTuningJobName"],
            t["HyperParameterTuningJobStatus"],
            format_time(t.get("CreationTime")),
            format_time(t.get("HyperParameterTuningEndTime")),
        ]
        for t in found
    ]
    return format_table(["NAME", "STATUS", "CREATED", "ENDED"], rows)


def _export(described: dict[str, Any]) -> None:
    """The trials as CSV on stdout, with the analytics' columns. On a terminal every cell's
    control characters are written as escapes (``\\x1b``): a hyperparameter or metric value
    holds what its job's script printed, and must not drive the terminal; a file or a pipe
    gets the values as they are."""
    columns, rows = analytics_rows(described)
    if sys.stdout.isatty():
        columns = [printable(column) for column in columns]
        rows = [{printable(k): _escaped(v) for k, v in row.items()} for row in rows]
    writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


def _escaped(value: Any) -> Any:
    return printable(value) if isinstance(value, str) else value
