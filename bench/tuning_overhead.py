"""Overhead per trial of a tuning job: N trials of a 0.1 s job at parallelism 2 through the full
job path (each trial a real training job), against the ideal (N x 0.1 s / 2), and Ray Tune
running the same trivial trial in the same run, rounds interleaved (A, B, A, B, ...).

    python bench/tuning_overhead.py [--trials 500] [--parallel 2] [--rounds 3]
                                    [--baseline REF] [--ray-no-reuse] [--no-ray]

Each round runs every variant once, the order rotating from round to round, so the machine's
load (shared, and moving from minute to minute) falls on all of them alike; the figures are the
medians over the rounds and each variant's ratio to the ideal.

- trainops: a fresh `trainops server` per round (local capacity 2 x parallel CPUs so that
  `parallel` ml.m5.large trials fit), the tuning job submitted with `trainops tune`; its wall
  time is the tuning job's CreationTime to HyperParameterTuningEndTime. The working tree's
  `src/` is copied at the start; `--baseline REF` adds the same with `src/` of a git ref (the
  code before a change). The trials' own times (training
  start to end, as recorded) split the overhead into the part inside a job and the part between
  jobs (tuner, submission, scheduling).
- Ray Tune: `ray.init(num_cpus=parallel)` per round, then `Tuner.fit()` of a function trainable
  that sleeps 0.1 s and reports once, `max_concurrent_trials=parallel`, with `reuse_actors=True`
  (Ray's advice for short trials: its fastest setting); `--ray-no-reuse` adds its default (a new
  actor per trial). Its wall time is fit()'s.
- bare processes (`--no-bare` leaves it out): the same script started as `python train.py --lr X`,
  `parallel` at a time, by a loop that only reads each one's output: the floor of any system that
  runs each trial as a fresh process of the script, as SageMaker's contract does (Ray Tune's
  trainable runs inside a process that is already up).

Writes results/tuning_overhead.json (every round's figures).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import yaml
from _processes import ProcessSweeper, tool
from _report import machine, positive, versions
from ab_compare import REPO, baseline_tree, rotated, server, variant_env

RESULTS = Path(__file__).with_name("results") / "tuning_overhead.json"
TRIAL_S = 0.1
SCRIPT = """
import argparse, time
p = argparse.ArgumentParser(); p.add_argument("--lr", type=float)
a, _ = p.parse_known_args()
time.sleep(0.1)
print(f"loss={a.lr:.6f}", flush=True)
"""

Variant = Callable[[Path, int], dict[str, float]]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=positive, default=500)
    parser.add_argument("--parallel", type=positive, default=2)
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--baseline", help="also run the tuner of this git ref's src/")
    parser.add_argument("--ray-no-reuse", action="store_true", help="also Ray's default actors")
    parser.add_argument(
        "--no-ray", action="store_true", help="trainops only (Ray's node may not start under load)"
    )
    parser.add_argument("--no-bare", action="store_true", help="leave out the bare processes")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    args = parser.parse_args()
    ideal = args.trials * TRIAL_S / args.parallel
    rounds: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="trainops-tuning-overhead-") as tmp:
        variants = make_variants(Path(tmp), args)
        for index in range(args.rounds):
            for name in rotated(list(variants), index):
                load = psutil.getloadavg()[0]
                work = Path(tmp) / f"{name}-{index}"
                work.mkdir()
                figures = {**variants[name](work, index), "load_1min_before": load}
                rounds.setdefault(name, []).append(figures)
                print(f"round {index + 1} {name}: {figures}", file=sys.stderr, flush=True)
            result = summary(rounds, args, ideal)  # after each round: an interrupted run keeps it
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=2))


def make_variants(tmp: Path, args: argparse.Namespace) -> dict[str, Variant]:
    trials, parallel = args.trials, args.parallel
    # A copy, so that editing src/ while the benchmark runs changes no later round.
    head = Path(shutil.copytree(REPO / "src", tmp / "head" / "src",
                                ignore=shutil.ignore_patterns("__pycache__")))  # fmt: skip
    variants: dict[str, Variant] = {
        "trainops": lambda work, i: trainops_round(head, work, trials, parallel),
    }
    if not args.no_ray:
        variants["ray_tune"] = lambda work, i: ray_tune_round(work, trials, parallel, reuse=True)
    if not args.no_bare:
        variants["bare_processes"] = lambda work, i: bare_round(work, trials, parallel)
    if args.baseline:
        before = baseline_tree(args.baseline, tmp / "baseline")
        variants["trainops_baseline"] = lambda work, i: trainops_round(
            before, work, trials, parallel
        )
    if args.ray_no_reuse:
        variants["ray_tune_no_reuse"] = lambda work, i: ray_tune_round(
            work, trials, parallel, reuse=False
        )
    return variants


def tune_yaml(trials: int, parallel: int) -> str:
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
    return yaml.safe_dump(doc, sort_keys=False)


def trainops_round(src: Path, work: Path, trials: int, parallel: int) -> dict[str, float]:
    (work / "src").mkdir()
    (work / "src" / "train.py").write_text(SCRIPT)
    (work / "tune.yaml").write_text(tune_yaml(trials, parallel))
    home = work / "home"
    sweeper = ProcessSweeper()
    try:
        # Room for `parallel` ml.m5.large trials (2 vCPUs each), as Ray gets `parallel` CPUs.
        # The server is what holds the capacity: it must get the variable (the CLI needs none).
        capacity = {"TRAINOPS_LOCAL_CPUS": str(2 * parallel)}
        env = {**variant_env(src, home), **capacity}
        with server(src, home, sweeper, work / "server.log", capacity) as url:
            env["TRAINOPS_SERVER"] = url
            cli = tool("trainops")
            subprocess.run([*cli, "tune", str(work / "tune.yaml")], env=env, check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            described = json.loads(_out([*cli, "tuning", "describe", "overhead"], env))
            exported = _out([*cli, "tuning", "export", "overhead"], env)
    finally:
        sweeper.stop_all()
    counters = described["TrainingJobStatusCounters"]
    failed = {t["TrainingJobName"]: t.get("FailureReason") for t in described["TrainingJobs"]
              if t["TrainingJobStatus"] != "Completed"}  # fmt: skip
    assert counters["Completed"] == trials, (counters, failed)  # the reasons: the tree goes
    start = datetime.fromisoformat(described["CreationTime"])
    end = datetime.fromisoformat(described["HyperParameterTuningEndTime"])
    rows = list(csv.DictReader(io.StringIO(exported)))
    in_job = statistics.fmean(float(r["TrainingElapsedTimeSeconds"]) for r in rows)
    return {"wall_s": (end - start).total_seconds(), "mean_trial_training_s": in_job}


def _out(argv: list[str], env: dict[str, str]) -> str:
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout


def ray_tune_round(storage: Path, trials: int, parallel: int, reuse: bool) -> dict[str, float]:
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
            tune_config=tune.TuneConfig(num_samples=trials, max_concurrent_trials=parallel,
                                        metric="loss", mode="min", reuse_actors=reuse),
            run_config=tune.RunConfig(storage_path=str(storage), verbose=0),
        )  # fmt: skip
        started = time.monotonic()
        results = tuner.fit()
        wall = time.monotonic() - started
    finally:
        ray.shutdown()
    assert len(results) == trials and not results.errors, results.errors
    return {"wall_s": wall}


def bare_round(work: Path, trials: int, parallel: int) -> dict[str, float]:
    """The script alone, a fresh process per trial, ``parallel`` at a time: nothing around it
    but starting it, reading its output and picking the next learning rate."""
    import random
    import selectors

    script = work / "train.py"
    script.write_text(SCRIPT)
    draw = random.Random(1)
    selector = selectors.DefaultSelector()
    started = done = 0
    outputs: dict[subprocess.Popen[bytes], list[bytes]] = {}

    def start() -> None:
        lr = math.exp(draw.uniform(math.log(0.001), math.log(0.1)))
        proc = subprocess.Popen([sys.executable, str(script), "--lr", repr(lr)], cwd=work,
                                stdout=subprocess.PIPE)  # fmt: skip
        outputs[proc] = []
        assert proc.stdout is not None
        selector.register(proc.stdout, selectors.EVENT_READ, proc)

    began = time.monotonic()
    try:
        while done < trials:
            while started < trials and len(outputs) < parallel:
                start()
                started += 1
            for key, _ in selector.select():
                proc = key.data
                chunk = os.read(key.fd, 65536)
                if chunk:
                    outputs[proc].append(chunk)
                    continue
                selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                output = b"".join(outputs.pop(proc))
                assert proc.wait() == 0 and b"loss=" in output, (proc.args, output)
                done += 1
        return {"wall_s": time.monotonic() - began}
    finally:
        for proc in outputs:  # a failed trial ended the round: end the rest with it
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
        selector.close()


def summary(
    rounds: dict[str, list[dict[str, float]]], args: argparse.Namespace, ideal: float
) -> dict[str, Any]:
    per_trial = {}
    for name, figures in rounds.items():
        wall = statistics.median(f["wall_s"] for f in figures)
        row = {
            "wall_s_median": round(wall, 2),
            "over_ideal": round(wall / ideal, 2),
            "overhead_per_trial_s": round((wall - ideal) * args.parallel / args.trials, 3),
        }
        if "mean_trial_training_s" in figures[0]:
            in_job = statistics.median(f["mean_trial_training_s"] for f in figures)
            row["overhead_inside_a_job_s"] = round(in_job - TRIAL_S, 3)
        per_trial[name] = row
    ours, ray = per_trial["trainops"], per_trial.get("ray_tune")
    bare = per_trial.get("bare_processes")
    return {
        "trials": args.trials,
        "parallel": args.parallel,
        "rounds": len(next(iter(rounds.values()))),
        "trial_seconds": TRIAL_S,
        "ideal_s": ideal,
        "baseline": args.baseline,
        "summary": {
            **per_trial,
            "trainops_overhead_vs_ray_tune": None
            if ray is None
            else round(ours["overhead_per_trial_s"] / ray["overhead_per_trial_s"], 2),
            "bare_processes_overhead_vs_ray_tune": None
            if ray is None or bare is None
            else round(bare["overhead_per_trial_s"] / ray["overhead_per_trial_s"], 2),
        },
        "rounds_raw": rounds,
        "machine": machine(),
        "versions": versions(),
        "measured": datetime.now().astimezone().isoformat(timespec="seconds"),
    }


if __name__ == "__main__":
    main()
