"""How fast early stopping reacts through the job path: from a trial's decisive metric line to
the tuner's stop and to the script's SIGTERM, rounds interleaved with a baseline's ``src/``.

    python bench/tuning_reaction.py [--trials 12] [--rounds 3] [--baseline REF]

A tuning job (``Random``, early stopping ``Auto``: the median rule, parallelism 2) on a fresh
``trainops server`` per round. Each trial's script prints ``val_loss=<lr>`` every 0.3 s for 20
epochs: its curve is flat, so once three trials have ended the median rule decides on a trial's
*first* value (a trial whose learning rate is above the median of the ended ones' is stopped
there, one below it never). For each stopped trial:

- ``to_stop_asked``: the job's ``stop_requested_at`` (the tuner's stop, as the store recorded it)
  minus the time the script printed its first value;
- ``to_signalled``: the time the script's SIGTERM handler ran minus that same print.

Both clocks are this machine's wall clock. The figures are medians over the stopped trials of
all rounds (and the 90th percentile). Writes results/tuning_reaction.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import yaml
from _processes import ProcessSweeper, tool
from _report import machine, positive, versions
from ab_compare import REPO, baseline_tree, rotated, server, variant_env

from trainops.client import Client

RESULTS = Path(__file__).with_name("results") / "tuning_reaction.json"
SCRIPT = """
import argparse, signal, sys, time
p = argparse.ArgumentParser(); p.add_argument("--lr", type=float)
a, _ = p.parse_known_args()
def term(signum, frame):
    print(f"signalled at={time.time():.6f}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
for epoch in range(1, 21):
    time.sleep(0.3)
    print(f"epoch={epoch} at={time.time():.6f} val_loss={a.lr:.6f}", flush=True)
"""
_FIRST = re.compile(r"epoch=1 at=([0-9.]+)")
_SIGNALLED = re.compile(r"signalled at=([0-9.]+)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=positive, default=12)
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--baseline", help="also run this git ref's src/")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    args = parser.parse_args()
    found: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="trainops-tuning-reaction-") as tmp:
        trees = {"trainops": Path(shutil.copytree(REPO / "src", Path(tmp) / "head" / "src",
                                                  ignore=shutil.ignore_patterns("__pycache__")))}  # fmt: skip
        if args.baseline:
            trees["trainops_baseline"] = baseline_tree(args.baseline, Path(tmp) / "baseline")
        for index in range(args.rounds):
            for name in rotated(list(trees), index):
                work = Path(tmp) / f"{name}-{index}"
                work.mkdir()
                load = psutil.getloadavg()[0]
                stopped = one_round(trees[name], work, args.trials)
                for trial in stopped:
                    trial["load_1min_before"] = load
                found.setdefault(name, []).extend(stopped)
                print(f"round {index + 1} {name}: {stopped}", file=sys.stderr, flush=True)
            result = report(found, args)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))


def tune_yaml(trials: int) -> str:
    doc = {
        "tuning_job_name": "reaction",
        "strategy": "Random",
        "training_job_early_stopping_type": "Auto",
        "random_seed": 1,
        "training_job": {"entry_point": "train.py", "source_dir": "src",
                         "metric_definitions": [{"name": "val_loss",
                                                 "regex": "val_loss=([0-9.]+)"}]},
        "objective": {"metric_name": "val_loss", "type": "Minimize"},
        "hyperparameter_ranges": {"lr": {"type": "Continuous", "min_value": 0.001,
                                         "max_value": 0.1, "scaling_type": "Logarithmic"}},
        "resource_limits": {"max_number_of_training_jobs": trials,
                            "max_parallel_training_jobs": 2},
    }  # fmt: skip
    return yaml.safe_dump(doc, sort_keys=False)


def one_round(src: Path, work: Path, trials: int) -> list[dict[str, Any]]:
    """The stopped trials of one tuning job, each with its two reaction times."""
    (work / "src").mkdir()
    (work / "src" / "train.py").write_text(SCRIPT)
    (work / "tune.yaml").write_text(tune_yaml(trials))
    home = work / "home"
    sweeper = ProcessSweeper()
    try:
        env = {**variant_env(src, home), "TRAINOPS_LOCAL_CPUS": "4"}
        with server(src, home, sweeper, work / "server.log", {"TRAINOPS_LOCAL_CPUS": "4"}) as url:
            env["TRAINOPS_SERVER"] = url
            subprocess.run([*tool("trainops"), "tune", str(work / "tune.yaml")], env=env,
                           check=True, stdout=subprocess.DEVNULL)  # fmt: skip
            client = Client(url, (home / "token").read_text().strip())
            described = client.describe_tuning_job("reaction")
            stopped = [t["TrainingJobName"] for t in described["TrainingJobs"]
                       if t["TrainingJobStatus"] == "Stopped"]  # fmt: skip
            lines = {job: json.dumps(client.logs(job)) for job in stopped}
    finally:
        sweeper.stop_all()
    asked = _stops_asked(home / "trainops.db")
    return [_reaction(job, lines[job], asked.get(job)) for job in stopped]


def _stops_asked(db: Path) -> dict[str, float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, stop_requested_at FROM jobs").fetchall()
    return {name: at for name, at in rows if at is not None}


def _reaction(job: str, log: str, asked: float | None) -> dict[str, Any]:
    first = _FIRST.search(log)
    signalled = _SIGNALLED.search(log)
    start = float(first.group(1)) if first else None
    return {
        "job": job,
        "to_stop_asked_s": None if start is None or asked is None else round(asked - start, 3),
        "to_signalled_s": None
        if start is None or signalled is None
        else round(float(signalled.group(1)) - start, 3),
    }


def report(found: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for name, trials in found.items():
        row: dict[str, Any] = {"stopped_trials": len(trials)}
        for key in ("to_stop_asked_s", "to_signalled_s"):
            values = sorted(v for t in trials if (v := t[key]) is not None)
            row[f"{key}_median"] = round(statistics.median(values), 3) if values else None
            row[f"{key}_p90"] = round(values[int(0.9 * (len(values) - 1))], 3) if values else None
        summary[name] = row
    return {
        "trials_per_round": args.trials,
        "rounds": args.rounds,
        "baseline": args.baseline,
        "summary": summary,
        "stopped": found,
        "machine": machine(),
        "versions": versions(),
        "measured": datetime.now().astimezone().isoformat(timespec="seconds"),
    }


if __name__ == "__main__":
    main()
