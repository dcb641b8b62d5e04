"""The early-stopping benchmark through the job path: each search a real tuning job on a fresh
``trainops server`` (the tuner service, its trials ordinary training jobs whose script prints
``val_loss`` after each epoch, scraped as the objective's intermediate values).

An early-stopping search is stopped (``trainops tuning stop``'s API call) once its trials have
reported the random search's budget of epochs; the trials running then end Stopped with their
last value, as any stopped trial. Epochs spent are counted from the metric points the trials
reported (one per epoch, timestamped by the agent), so an epoch a trial ran between the tuner's
decision and the trial's end counts too.
"""

from __future__ import annotations

import bisect
import math
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from _processes import ProcessSweeper, tool
from ab_compare import server, variant_env

from trainops._errors import JobNotFoundError
from trainops.client import Client

MLP = Path(__file__).with_name("_digits_mlp.py")
_ENDED = ("Completed", "Stopped", "Failed")
_POLL_S = 1.0


def prepare_code(work: Path, digits: Path) -> Path:
    """The training job's source folder: the MLP as ``train.py`` and the data beside it."""
    code = work / "code"
    code.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MLP, code / "train.py")
    shutil.copyfile(digits, code / "digits.npz")
    return code


def tune_yaml(
    name: str, config: dict[str, Any], seed: int, max_epochs: int, epoch_seconds: float
) -> str:
    """The tuning file of one search (``config``: the library config's fields)."""
    static = {"epochs": max_epochs, "seed": seed, "epoch_seconds": epoch_seconds}
    doc = {
        "tuning_job_name": name,
        **config,
        "training_job": {
            "entry_point": "train.py",
            "source_dir": "code",
            "hyperparameters": static,
            "metric_definitions": [{"name": "val_loss", "regex": "val_loss=([0-9.]+)"}],
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def run_searches(
    src: Path, work: Path, searches: dict[str, tuple[str, int | None]]
) -> dict[str, dict[str, Any]]:
    """Run each search (name -> (tuning file, epochs after which to stop it, or None)) in turn
    on one fresh server; each one's trials as :func:`collect` gives them."""
    home = work / "home"
    sweeper = ProcessSweeper()
    found: dict[str, dict[str, Any]] = {}
    try:
        env = {**variant_env(src, home), "TRAINOPS_LOCAL_CPUS": "4"}
        with server(src, home, sweeper, work / "server.log") as url:
            env["TRAINOPS_SERVER"] = url
            client = Client(url, (home / "token").read_text().strip())
            for method, (tune_file, budget) in searches.items():
                found[method] = _one_search(client, env, work, tune_file, budget)
    finally:
        sweeper.stop_all()
    return found


def _one_search(
    client: Client, env: dict[str, str], work: Path, tune_file: str, budget: int | None
) -> dict[str, Any]:
    name = yaml.safe_load((work / tune_file).read_text())["tuning_job_name"]
    started = time.perf_counter()
    with (work / f"{name}.out").open("w") as out:
        proc = subprocess.Popen([*tool("trainops"), "tune", str(work / tune_file)], env=env,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            points = _watch(client, name, budget, proc)
        finally:
            if proc.poll() is None:
                proc.wait(timeout=600)
    described = client.describe_tuning_job(name)
    points = {t["TrainingJobName"]: _points(client, t["TrainingJobName"])
              for t in described["TrainingJobs"]}  # fmt: skip
    return {**collect(described, points), "seconds": round(time.perf_counter() - started, 1)}


def _watch(
    client: Client, name: str, budget: int | None, proc: subprocess.Popen[bytes]
) -> dict[str, list[tuple[float, float]]]:
    """Follow the tuning job until it ends, stopping it once its trials spent ``budget``."""
    points: dict[str, list[tuple[float, float]]] = {}
    done: set[str] = set()
    stopped = False
    while True:
        described = _describe(client, name, proc)
        if described is None:
            time.sleep(_POLL_S)
            continue
        for trial in described["TrainingJobs"]:
            job = trial["TrainingJobName"]
            if job not in done:
                points[job] = _points(client, job)
                if trial["TrainingJobStatus"] in _ENDED:
                    done.add(job)
        spent = sum(len(p) for p in points.values())
        if budget is not None and not stopped and spent >= budget:
            client.stop_tuning_job(name)
            stopped = True
        if described["HyperParameterTuningJobStatus"] in _ENDED:
            return points
        time.sleep(_POLL_S)


def _describe(client: Client, name: str, proc: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    try:
        return client.describe_tuning_job(name)
    except JobNotFoundError:  # not created yet: `trainops tune` is still uploading the code
        if proc.poll() is not None:
            raise
        return None


def _points(client: Client, job: str) -> list[tuple[float, float]]:
    try:
        found = client.metrics(job, "val_loss")
    except JobNotFoundError:  # not submitted yet
        return []
    return [(datetime.fromisoformat(p["Timestamp"]).timestamp(), p["Value"]) for p in found]


def collect(
    described: dict[str, Any], points: dict[str, list[tuple[float, float]]]
) -> dict[str, Any]:
    """Best objective against epochs spent: after each trial's last epoch (in time order), the
    epochs all trials had reported by then and the best final objective of the trials ended."""
    epochs_at = sorted(ts for found in points.values() for ts, _ in found)
    ends = sorted((found[-1][0], job) for job, found in points.items() if found)
    objective = {t["TrainingJobName"]: t.get("FinalHyperParameterTuningJobObjectiveMetric", {})
                 .get("Value") for t in described["TrainingJobs"]}  # fmt: skip
    best, trace = math.inf, []
    for end, job in ends:
        value = objective.get(job)
        if value is not None and math.isfinite(value) and value < best:
            best = value
        trace.append([bisect.bisect_right(epochs_at, end), best])
    statuses = [t["TrainingJobStatus"] for t in described["TrainingJobs"]]
    return {
        "trials": len(statuses),
        "stopped": statuses.count("Stopped"),
        "failed": statuses.count("Failed"),
        "epochs": len(epochs_at),
        "trace": trace,
        "tuning_job_status": described["HyperParameterTuningJobStatus"],
    }
