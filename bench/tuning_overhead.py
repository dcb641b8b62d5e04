"""Overhead per trial of a tuning job: N trials of a 0.1 s job at parallelism 2 through the full
job path (each trial a real training job), against the ideal (N x 0.1 s / 2), and Ray Tune
running the same trivial trial in the same run.

    python bench/tuning_overhead.py [--trials 500] [--parallel 2]

trainops: a `trainops server` started once (warm; local capacity 2 x parallel CPUs so that
`parallel` ml.m5.large trials fit), the tuning job submitted with `trainops tune`; its wall time is the tuning job's CreationTime to HyperParameterTuningEndTime. Ray Tune:
`ray.init(num_cpus=parallel)` once, then `Tuner.fit()` of a function trainable that sleeps 0.1 s
and reports once, `max_concurrent_trials=parallel`; its wall time is fit()'s. Writes
results/tuning_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

CLI = [sys.executable, "-m", "trainops.cli"]
RESULTS = Path(__file__).with_name("results") / "tuning_overhead.json"
TRIAL_S = 0.1
SCRIPT = """
import argparse, time
p = argparse.ArgumentParser(); p.add_argument("--lr", type=float)
a, _ = p.parse_known_args()
time.sleep(0.1)
print(f"loss={a.lr:.6f}", flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    ideal = args.trials * TRIAL_S / args.parallel
    with tempfile.TemporaryDirectory(prefix="trainops-tuning-overhead-") as tmp:
        ours = trainops_wall(Path(tmp), args.trials, args.parallel)
        ray = ray_tune_wall(Path(tmp) / "ray", args.trials, args.parallel)
    result = {
        "trials": args.trials,
        "parallel": args.parallel,
        "trial_seconds": TRIAL_S,
        "ideal_s": ideal,
        "trainops_wall_s": round(ours, 2),
        "ray_tune_wall_s": round(ray, 2),
        "trainops_over_ideal": round(ours / ideal, 2),
        "ray_tune_over_ideal": round(ray / ideal, 2),
        "trainops_overhead_per_trial_s": round((ours - ideal) * args.parallel / args.trials, 3),
        "ray_tune_overhead_per_trial_s": round((ray - ideal) * args.parallel / args.trials, 3),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "measured": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def trainops_wall(tmp: Path, trials: int, parallel: int) -> float:
    (tmp / "src").mkdir()
    (tmp / "src" / "train.py").write_text(SCRIPT)
    doc = {
        "tuning_job_name": "overhead",
        "strategy": "Random",
        "random_seed": 1,
        "training_job": {"entry_point": "train.py", "source_dir": "src",
                         "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}]},
        "objective": {"metric_name": "loss", "type": "Minimize"},
        "hyperparameter_ranges": {"lr": {"type": "Continuous", "min_value": 0.001,
                                         "max_value": 0.1, "scaling_type": "Logarithmic"}},
        "resource_limits": {"max_number_of_training_jobs": trials,
                            "max_parallel_training_jobs": parallel},
    }  # fmt: skip
    (tmp / "tune.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    port = free_port()
    home = tmp / "home"
    # Room for `parallel` ml.m5.large trials (2 vCPUs each) on the local backend of a small
    # machine, as Ray is given `parallel` CPUs for as many 1-CPU trials.
    env = {**os.environ, "TRAINOPS_HOME": str(home), "TRAINOPS_LOCAL_CPUS": str(2 * parallel)}
    server = subprocess.Popen([*CLI, "server", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not listening(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        client_env = {**env, "TRAINOPS_SERVER": f"http://127.0.0.1:{port}"}
        subprocess.run([*CLI, "tune", str(tmp / "tune.yaml")], env=client_env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        described = json.loads(subprocess.run(
            [*CLI, "tuning", "describe", "overhead"], env=client_env, capture_output=True,
            text=True, check=True).stdout)  # fmt: skip
    finally:
        server.terminate()
        server.wait()
    assert described["TrainingJobStatusCounters"]["Completed"] == trials, described
    start = datetime.fromisoformat(described["CreationTime"])
    end = datetime.fromisoformat(described["HyperParameterTuningEndTime"])
    return (end - start).total_seconds()


def ray_tune_wall(storage: Path, trials: int, parallel: int) -> float:
    import ray
    from ray import tune

    def trainable(config: dict[str, Any]) -> None:
        time.sleep(TRIAL_S)
        tune.report({"loss": config["lr"]})

    ray.init(num_cpus=parallel, include_dashboard=False, log_to_driver=False)
    try:
        tuner = tune.Tuner(
            trainable,
            param_space={"lr": tune.loguniform(1e-3, 1e-1)},
            tune_config=tune.TuneConfig(
                num_samples=trials, max_concurrent_trials=parallel, metric="loss", mode="min"
            ),
            run_config=tune.RunConfig(storage_path=str(storage), verbose=0),
        )
        started = time.monotonic()
        results = tuner.fit()
        wall = time.monotonic() - started
    finally:
        ray.shutdown()
    assert len(results) == trials and not results.errors, results.errors
    return wall


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


if __name__ == "__main__":
    main()
