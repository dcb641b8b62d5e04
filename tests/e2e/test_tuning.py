"""End to end: `trainops tune` runs a tiny tuning job whose trials are real training jobs of a real
script, `trainops tuning ...` reads it, and a server SIGKILLed while trials run resumes the tuning
job with every trial run exactly once (on the local backend and on a Ray cluster)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e._harness import CLI, Server, cli_env, trainops, wait_for

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits"

# Reports a loss per epoch that depends on the tuned learning rate and optimizer, and checks
# that it got its hyperparameters as a SageMaker training container passes them.
SCRIPT = """
import argparse, json, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float)
parser.add_argument("--optimizer")
parser.add_argument("--epochs", type=int)
args, rest = parser.parse_known_args()
assert not rest, rest
config = os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "hyperparameters.json")
passed = json.load(open(config))
assert json.loads(passed["_tuning_objective_metric"]) == "loss", passed
assert "_tuning_objective_metric" not in json.loads(os.environ["SM_HPS"])
wait = os.environ.get("WAIT_FOR")
for epoch in range(1, args.epochs + 1):
    if wait and epoch == 2:
        while not os.path.exists(wait):
            time.sleep(0.05)
    bonus = 0.5 if args.optimizer == "adam" else 1.0
    print(f"epoch={epoch} loss={bonus * abs(args.lr - 0.01) + 1.0 / epoch:.6f}", flush=True)
"""


def write_tuning(
    folder: Path, jobs: int, parallel: int, changes: dict[str, Any] | None = None, **env: str
) -> Path:
    """The tiny tuning job's file in ``folder``, its fields updated with ``changes``."""
    src = folder / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "train.py").write_text(SCRIPT)
    doc: dict[str, Any] = {
        "tuning_job_name": "tiny",
        "strategy": "Random",
        "random_seed": 3,
        "training_job": {
            "entry_point": "train.py",
            "source_dir": "src",
            "hyperparameters": {"epochs": 3},
            "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}],
            "environment": env,
        },
        "objective": {"metric_name": "loss", "type": "Minimize"},
        "hyperparameter_ranges": {
            "lr": {"type": "Continuous", "min_value": 0.001, "max_value": 0.1,
                   "scaling_type": "Logarithmic"},
            "optimizer": ["sgd", "adam"],
        },
        "resource_limits": {
            "max_number_of_training_jobs": jobs,
            "max_parallel_training_jobs": parallel,
        },
    }  # fmt: skip
    doc.update(changes or {})
    path = folder / "tune.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def describe(home: Path, **env: str) -> dict[str, Any]:
    result = trainops("tuning", "describe", "tiny", home=home, **env)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_tune_runs_trials_and_the_tuning_commands_read_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write_tuning(tmp_path, jobs=3, parallel=2)
    result = trainops("tune", str(path), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Submitted tuning job tiny" in result.stdout
    assert "Tuning job tiny Completed: MaxNumberOfTrainingJobsReached; best: #" in result.stdout
    assert "TRAINING JOB" in result.stdout and "OBJECTIVE" in result.stdout
    assert result.stdout.count("TRAINING JOB") == 1  # not a terminal: the table once, at the end
    assert "Completed after" in result.stdout  # and a line per trial as it ends
    described = describe(home)
    assert described["TrainingJobStatusCounters"]["Completed"] == 3
    assert described["ObjectiveStatusCounters"] == {"Succeeded": 3, "Pending": 0, "Failed": 0}
    config = described["HyperParameterTuningJobConfig"]
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 3, "MaxParallelTrainingJobs": 2}
    values = [
        t["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] for t in described["TrainingJobs"]
    ]
    best = json.loads(trainops("tuning", "best", "tiny", home=home).stdout)
    assert best["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == min(values)
    exported = trainops("tuning", "export", "tiny", home=home).stdout
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert list(rows[0]) == [
        "lr", "optimizer", "TrainingJobName", "TrainingJobStatus", "FinalObjectiveValue",
        "TrainingStartTime", "TrainingEndTime", "TrainingElapsedTimeSeconds",
    ]  # fmt: skip
    assert sorted(float(r["FinalObjectiveValue"]) for r in rows) == sorted(values)
    listed = trainops("tuning", "list", home=home).stdout
    assert "tiny" in listed and "Completed" in listed
    missing = trainops("tuning", "describe", "nope", home=home)
    assert missing.returncode == 2 and "no tuning job named 'nope'" in missing.stderr


def test_a_server_killed_mid_tuning_resumes_without_losing_or_repeating_a_trial(
    tmp_path: Path, backend: dict[str, str]
) -> None:
    home = tmp_path / "home"
    go = tmp_path / "go"
    path = write_tuning(tmp_path, jobs=4, parallel=2, WAIT_FOR=str(go))
    server = Server(home, **backend).start()
    follower = None
    try:
        follower = subprocess.Popen(
            [*CLI, "tune", str(path)], env=cli_env(home, **server.env()),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(
            lambda: (
                (r := trainops("tuning", "describe", "tiny", home=home, **server.env()))
                and r.returncode == 0
                and json.loads(r.stdout)["TrainingJobStatusCounters"]["InProgress"] == 2
            ),
            timeout=120,
        )
        server.kill()  # SIGKILL: the tuner and the control plane die mid-trial
        follower.kill()
        go.touch()  # the trials' scripts go on and end while no server runs
        server.start()
        done = wait_for(
            lambda: (
                (d := describe(home, **server.env()))["HyperParameterTuningJobStatus"]
                == "Completed"
                and d
            ),
            timeout=240,
        )
        jobs = trainops("jobs", "--limit", "1000", home=home, **server.env()).stdout
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
        server.stop()
    trials = done["TrainingJobs"]
    assert [t["TrialNumber"] for t in trials] == [0, 1, 2, 3]
    assert all(t["TrainingJobStatus"] == "Completed" for t in trials)
    names = [t["TrainingJobName"] for t in trials]
    assert len(set(names)) == 4
    assert sorted(ln.split()[0] for ln in jobs.splitlines() if ln.startswith("tiny-")) == sorted(
        names
    )
    assert len({json.dumps(t["TunedHyperParameters"]) for t in trials}) == 4


def test_ctrl_c_stops_the_tuning_job_and_its_trials(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write_tuning(tmp_path, jobs=4, parallel=2, WAIT_FOR=str(tmp_path / "never"))
    proc = subprocess.Popen(
        [*CLI, "tune", str(path)], env=cli_env(home),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(
            lambda: (
                (r := trainops("tuning", "describe", "tiny", home=home)).returncode == 0
                and json.loads(r.stdout)["TrainingJobStatusCounters"]["InProgress"] == 2
            ),
            timeout=120,
        )
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, output
    assert "Stopping the tuning job" in output
    assert "Tuning job tiny Stopped: StopRequested" in output
    described = describe(home)
    assert described["TrainingJobStatusCounters"]["Stopped"] == 2
    assert len(described["TrainingJobs"]) == 2


STRATEGIES = [
    ({"strategy": "Grid", "hyperparameter_ranges": {"lr": [0.01, 0.1], "optimizer": ["sgd", "adam"]},
      "resource_limits": {"max_parallel_training_jobs": 2}}, 4),
    ({"strategy": "Bayesian"}, 3),
    ({"strategy": "Hyperband", "strategy_config": {"hyperband_strategy_config":
      {"min_resource": 1, "reduction_factor": 3}}}, 3),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "jobs"), STRATEGIES, ids=["Grid", "Bayesian", "Hyperband"])
def test_each_strategy_runs_its_trials_through_trainops_tune(
    tmp_path: Path, changes: dict[str, Any], jobs: int
) -> None:
    home = tmp_path / "home"
    result = trainops("tune", str(write_tuning(tmp_path, jobs, 2, changes)), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Tuning job tiny Completed: MaxNumberOfTrainingJobsReached" in result.stdout
    described = describe(home)
    assert described["HyperParameterTuningJobConfig"]["Strategy"] == changes["strategy"]
    trials = described["TrainingJobs"]
    assert [t["TrialNumber"] for t in trials] == list(range(jobs))
    assert all(t["TrainingJobStatus"] in ("Completed", "Stopped") for t in trials), trials
    assert all("FinalHyperParameterTuningJobObjectiveMetric" in t for t in trials)
    tried = {tuple(sorted(t["TunedHyperParameters"].items())) for t in trials}
    assert len(tried) == jobs  # no combination twice
    if changes["strategy"] == "Grid":  # every combination, as SageMaker passes the values
        assert {dict(t)["lr"] + dict(t)["optimizer"] for t in tried} == {
            "0.01sgd", "0.01adam", "0.1sgd", "0.1adam"}  # fmt: skip


def test_a_target_objective_value_completes_the_tuning_job(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = {"completion_criteria": {"target_objective_metric_value": 10.0}}
    result = trainops("tune", str(write_tuning(tmp_path, 4, 1, target)), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Tuning job tiny Completed: TargetObjectiveMetricValueReached" in result.stdout
    described = describe(home)
    assert described["CompletionReason"] == "TargetObjectiveMetricValueReached"
    assert len(described["TrainingJobs"]) == 1  # every loss is below 10: the first one ends it


def test_the_digits_example_tunes_the_cnn_with_hyperband(tmp_path: Path) -> None:
    """examples/digits/tune.yaml, smaller: 3 trials of at most 3 epochs, one at a time."""
    work = tmp_path / "digits"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("data", "checkpoints"))
    subprocess.run([sys.executable, "prepare_data.py"], check=True, cwd=work, capture_output=True)
    doc = yaml.safe_load((work / "tune.yaml").read_text())
    doc["resource_limits"] = {"max_number_of_training_jobs": 3, "max_parallel_training_jobs": 1}
    doc["training_job"]["hyperparameters"]["epochs"] = 3
    (work / "tune.yaml").write_text(yaml.safe_dump(doc))
    home = tmp_path / "home"
    result = trainops("tune", str(work / "tune.yaml"), home=home, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Completed: MaxNumberOfTrainingJobsReached; best: #" in result.stdout
    name = result.stdout.split("Submitted tuning job ", 1)[1].split()[0]
    described = json.loads(trainops("tuning", "describe", name, home=home).stdout)
    assert described["HyperParameterTuningJobConfig"]["Strategy"] == "Hyperband"
    trials = described["TrainingJobs"]
    assert len(trials) == 3
    assert all(t["TrainingJobStatus"] in ("Completed", "Stopped") for t in trials), trials
    assert all(t["TunedHyperParameters"]["optimizer"] in ("adam", "sgd", "rmsprop") for t in trials)
    assert all("FinalHyperParameterTuningJobObjectiveMetric" in t for t in trials)


def test_a_reader_that_goes_away_stops_an_embedded_tuning_job(tmp_path: Path) -> None:
    # `trainops tune tune.yaml | head`: once nobody reads, it is as Ctrl-C. Without a server the
    # tuning job cannot outlive the command: it is stopped, not left InProgress in the store
    # (for whichever server starts next to resume behind the user's back).
    home = tmp_path / "home"
    go = tmp_path / "go"
    path = write_tuning(tmp_path, jobs=6, parallel=2, WAIT_FOR=str(go))
    err = tmp_path / "stderr"
    with err.open("w") as sink:
        proc = subprocess.Popen(
            [*CLI, "tune", str(path)], env=cli_env(home),
            stdout=subprocess.PIPE, stderr=sink, text=True,
        )  # fmt: skip
    try:
        wait_for(
            lambda: (
                (r := trainops("tuning", "describe", "tiny", home=home)).returncode == 0
                and json.loads(r.stdout)["TrainingJobStatusCounters"]["InProgress"] == 2
            ),
            timeout=120,
        )
        assert proc.stdout is not None
        proc.stdout.close()  # the reader goes away; the next line written breaks the pipe
        go.touch()  # the trials end, and their lines are written
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    errors = err.read_text()
    assert "Traceback" not in errors, errors
    assert "its output has no reader" in errors
    described = describe(home)
    assert described["HyperParameterTuningJobStatus"] in ("Stopped", "Completed"), described
    assert described["TrainingJobStatusCounters"]["InProgress"] == 0
