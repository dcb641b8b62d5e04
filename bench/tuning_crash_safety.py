"""Crash safety of tuning jobs, as a figure: a tuning job of N trials whose server is SIGKILLed K
times at random moments must end with exactly N counted trials, none repeated, none lost.

    python bench/tuning_crash_safety.py [--trials 100] [--kills 10] [--parallel 2] [--seed 0]

Starts a real `trainops server` on a loopback port with a fresh TRAINOPS_HOME (local capacity
2 x parallel CPUs, so that `parallel` ml.m5.large trials run at once), submits the
tuning job with `trainops tune` (then leaves it: the tuning job lives on the server), and
SIGKILLs the server after a random 1-4 s, K times, restarting it each time. Each trial is a real
training job of a script that reports a loss for 3 epochs over ~0.3 s. Writes
results/tuning_crash_safety.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

CLI = [sys.executable, "-m", "trainops.cli"]
RESULTS = Path(__file__).with_name("results") / "tuning_crash_safety.json"
SCRIPT = """
import argparse, time
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float); p.add_argument("--epochs", type=int)
a, _ = p.parse_known_args()
for epoch in range(1, a.epochs + 1):
    time.sleep(0.1)
    print(f"epoch={epoch} loss={abs(a.lr - 0.01) + 1.0 / epoch:.6f}", flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainops-tuning-crash-") as tmp:
        result = run(Path(tmp), args.trials, args.kills, args.parallel, random.Random(args.seed))
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "kill_times_s"}, indent=2))


def run(tmp: Path, trials: int, kills: int, parallel: int, rng: random.Random) -> dict[str, Any]:
    home = tmp / "home"
    tune = write_tuning(tmp, trials, parallel)
    port = free_port()
    env = {
        **os.environ,
        "TRAINOPS_HOME": str(home),
        "TRAINOPS_SERVER": f"http://127.0.0.1:{port}",
        # Room for `parallel` ml.m5.large trials (2 vCPUs each) on a small machine.
        "TRAINOPS_LOCAL_CPUS": str(2 * parallel),
    }
    server = start_server(env, port, home)
    started = time.monotonic()
    follower = subprocess.Popen([*CLI, "tune", str(tune)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
    wait(lambda: describe(env) is not None, 60)
    follower.kill()  # the tuning job lives on the server; nobody needs to watch it
    follower.wait()
    kill_times = []
    for _ in range(kills):
        time.sleep(rng.uniform(1.0, 4.0))
        if (described := describe(env)) and described[
            "HyperParameterTuningJobStatus"
        ] != "InProgress":
            break  # it ended before all the kills: fewer kills are reported
        server.send_signal(signal.SIGKILL)
        server.wait()
        kill_times.append(round(time.monotonic() - started, 2))
        server = start_server(env, port, home)
    done = wait(lambda: (d := describe(env)) and d["HyperParameterTuningJobStatus"] == "Completed"
                and d, 3600)  # fmt: skip
    elapsed = time.monotonic() - started
    jobs = subprocess.run([*CLI, "jobs", "--limit", "1000"], env=env, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    server.terminate()
    server.wait()
    return tally(done, jobs, trials, kill_times, elapsed)


def tally(
    done: dict[str, Any], jobs: str, trials: int, kill_times: list[float], elapsed: float
) -> dict[str, Any]:
    recorded = done["TrainingJobs"]
    numbers = [t["TrialNumber"] for t in recorded]
    names = [t["TrainingJobName"] for t in recorded]
    earlier = [e["name"] for t in recorded for e in t.get("EarlierTrainingJobs", [])]
    submitted = [ln.split()[0] for ln in jobs.splitlines() if ln.startswith("crash-")]
    return {
        "trials_asked": trials,
        "kills": len(kill_times),
        "kill_times_s": kill_times,
        "trials_counted": len(recorded),
        "trials_completed": sum(t["TrainingJobStatus"] == "Completed" for t in recorded),
        "trials_repeated": len(numbers) - len(set(numbers)),
        "trials_lost": len(set(range(trials)) - set(numbers)),
        "training_jobs": len(submitted),
        "training_jobs_retried": len(earlier),
        "training_jobs_not_a_trials": len(set(submitted) - set(names) - set(earlier)),
        "elapsed_s": round(elapsed, 1),
        "status_counters": done["TrainingJobStatusCounters"],
    }


def write_tuning(tmp: Path, trials: int, parallel: int) -> Path:
    (tmp / "src").mkdir()
    (tmp / "src" / "train.py").write_text(SCRIPT)
    doc = {
        "tuning_job_name": "crash",
        "strategy": "Random",
        "random_seed": 1,
        "training_job": {
            "entry_point": "train.py", "source_dir": "src", "hyperparameters": {"epochs": 3},
            "metric_definitions": [{"name": "loss", "regex": "loss=([0-9.]+)"}],
        },
        "objective": {"metric_name": "loss", "type": "Minimize"},
        "hyperparameter_ranges": {"lr": {"type": "Continuous", "min_value": 0.001,
                                         "max_value": 0.1, "scaling_type": "Logarithmic"}},
        "resource_limits": {"max_number_of_training_jobs": trials,
                            "max_parallel_training_jobs": parallel},
    }  # fmt: skip
    path = tmp / "tune.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def start_server(env: dict[str, str], port: int, home: Path) -> subprocess.Popen[bytes]:
    home.mkdir(parents=True, exist_ok=True)
    log = (home / f"server-{time.monotonic_ns()}.log").open("wb")
    server = subprocess.Popen([*CLI, "server", "--host", "127.0.0.1", "--port", str(port)],
                              env={**env, "TRAINOPS_SERVER": ""}, stdout=log,
                              stderr=subprocess.STDOUT)  # fmt: skip
    log.close()
    wait(lambda: listening(port), 60)
    return server


def describe(env: dict[str, str]) -> dict[str, Any] | None:
    result = subprocess.run([*CLI, "tuning", "describe", "crash"], env=env, capture_output=True,
                            text=True)  # fmt: skip
    if result.returncode != 0:
        return None
    described: dict[str, Any] = json.loads(result.stdout)
    return described


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


def wait(predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise SystemExit(f"condition not met within {timeout} s")


if __name__ == "__main__":
    main()
