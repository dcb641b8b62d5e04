"""``trainops tune TUNE`` (run a tuning job with a live table of its trials) and
``trainops tuning list|describe|stop|best|export|report [NAME]`` (``report`` writes the
job's plots as PNG, an HTML page and the data as JSON into ``--out DIR``).

``tune`` prints the table again whenever a trial's status or objective moves, with the counts by
status and the best so far, and at the end why the job ended. Ctrl-C (or SIGTERM / SIGHUP) stops
the tuning job and waits for its trials to stop; a second Ctrl-C exits at once (with an
embedded server the trials then stop with it).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

from trainops._errors import TrainopsError
from trainops._settings import Settings
from trainops.cli._parser import TUNING_ACTIONS
from trainops.cli._render import format_table
from trainops.cli._run import INTERRUPTED, signals_as_ctrl_c
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
_COUNTED = ("Completed", "InProgress", "RetryableError", "NonRetryableError", "Stopped")


def tune(args: argparse.Namespace) -> int:
    path = Path(args.tune)
    if not path.is_file():
        raise TrainopsError(f"{path}: no such tuning config file")
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
    """Print the table as it moves until the job ends; Ctrl-C stops the job and waits."""
    shown: object = None
    stopping = False
    while True:
        try:
            described = client.describe_tuning_job(name)
            seen = _progress(described)
            if seen != shown:
                print(format_trials(described), flush=True)
                shown = seen
            if described["HyperParameterTuningJobStatus"] in _ENDED:
                print(_ending(described), flush=True)
                return described
            time.sleep(_POLL_S)
        except KeyboardInterrupt:
            if stopping:
                return None
            stopping = True
            print("Stopping the tuning job (Ctrl-C again to leave now)...", flush=True)
            with contextlib.suppress(TrainopsError):  # it ended meanwhile: the next pass shows how
                client.stop_tuning_job(name)


def _progress(described: dict[str, Any]) -> object:
    trials = described.get("TrainingJobs", [])
    moving = [(t["TrainingJobName"], t["TrainingJobStatus"], _objective(t)) for t in trials]
    return described["HyperParameterTuningJobStatus"], moving


def _objective(trial: dict[str, Any]) -> float | None:
    metric = trial.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    value = metric.get("Value")
    return None if value is None else float(value)


def format_trials(described: dict[str, Any]) -> str:
    """The live table: each trial's hyperparameters, status, objective and elapsed time, the
    counts by status and the best so far."""
    trials = described.get("TrainingJobs", [])
    tuned = sorted({k for t in trials for k in t.get("TunedHyperParameters", {})})
    rows = [
        [
            str(t["TrialNumber"]),
            t["TrainingJobName"],
            *(_short(t["TunedHyperParameters"].get(k, "")) for k in tuned),
            t["TrainingJobStatus"],
            "" if _objective(t) is None else f"{_objective(t):.6g}",
            _elapsed(t),
        ]
        for t in trials
    ]
    header = ["#", "TRAINING JOB", *(k.upper() for k in tuned), "STATUS", "OBJECTIVE", "ELAPSED"]
    counters = described.get("TrainingJobStatusCounters", {})
    counts = ", ".join(f"{k} {counters.get(k, 0)}" for k in _COUNTED)
    lines = [
        f"{described['HyperParameterTuningJobName']}: "
        f"{described['HyperParameterTuningJobStatus']} ({counts})",
        format_table(header, rows) if rows else "No trials yet.",
    ]
    best = described.get("BestTrainingJob")
    if best is not None:
        lines.append(f"Best so far: {best['TrainingJobName']} ({_objective(best):.6g})")
    return "\n".join(lines)


def _short(value: str) -> str:
    try:
        return f"{float(value):.4g}"
    except ValueError:
        return value[:24]


def _elapsed(trial: dict[str, Any]) -> str:
    start = trial.get("TrainingStartTime") or trial.get("CreationTime")
    if not start:
        return ""
    from datetime import UTC, datetime

    end_text = trial.get("TrainingEndTime")
    end = datetime.fromisoformat(end_text) if end_text else datetime.now(UTC)
    return f"{(end - datetime.fromisoformat(start)).total_seconds():.0f}s"


def _ending(described: dict[str, Any]) -> str:
    status = described["HyperParameterTuningJobStatus"]
    why = described.get("CompletionReason") or described.get("FailureReason") or "no reason given"
    best = described.get("BestTrainingJob")
    found = "no trial has an objective" if best is None else f"best: {best['TrainingJobName']}"
    return f"Tuning job {described['HyperParameterTuningJobName']} {status}: {why}; {found}"


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
    """The trials as CSV on stdout, with the analytics' columns."""
    columns, rows = analytics_rows(described)
    writer = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
