"""Early stopping on real learning curves: Hyperband and the median rule against random search
with every trial run to its full budget, by the best objective reached against the epochs spent.

    python bench/tuning_early_stopping.py [--seeds 10] [--trials 30] [--max-epochs 27]
                                          [--path jobs|library|both]

The trials are real training: a one-hidden-layer MLP in numpy (``_digits_mlp.py``: ReLU, Adam,
one pass over the training set per epoch) on scikit-learn's digits (1,797 8x8 images; a fixed
two-thirds / one-third split, standardised), tuned over the learning rate, the hidden width, the
L2 penalty and the batch size; the objective is the validation log-loss (minimised) after each
epoch, and the epoch is the resource. Each configuration's training is seeded by the benchmark
seed and its hyperparameters, so a run is repeatable.

Per seed, three searches:

- ``random_full``: ``Random``, early stopping ``Off``, ``--trials`` trials of ``--max-epochs``
  each; its total epochs are the budget and its best is the target.
- ``median_rule``: ``Random`` proposals with early stopping ``Auto`` (SageMaker's median rule).
- ``hyperband``: trainops' ``Hyperband`` (its TPE proposals; min resource 1, max
  ``--max-epochs``, reduction factor 3).

``--path jobs`` (the headline) runs each search as a real tuning job on a fresh ``trainops
server`` per seed, its trials ordinary training jobs at parallelism 2 (``_early_stopping_jobs``);
an early-stopping search is stopped once its trials have spent the budget. ``--path library``
runs trainops' :class:`~trainops.tuning.Search` (the library the tuner drives) in this process,
one trial at a time, until the budget: the same curves and decisions without the job path.

A trial's objective is its last value (a stopped trial's last intermediate value, as SageMaker
counts it). Figures: for each seed, the epochs each search needed before its best reached random
search's final best (its fraction of random's budget; the target is at most a third), and each
search's best at a tenth, a third and the whole of the budget; medians and interquartile ranges
over the seeds. Writes results/tuning_early_stopping.json.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import _digits_mlp
from _early_stopping_jobs import prepare_code, run_searches, tune_yaml
from _report import machine, positive, versions
from ab_compare import REPO, rotated

from trainops.tuning import Search, TrialStatus, TuningJobConfig

RESULTS = Path(__file__).with_name("results") / "tuning_early_stopping.json"
RANGES: dict[str, Any] = {
    "learning_rate": {"type": "Continuous", "min_value": 1e-4, "max_value": 0.5,
                      "scaling_type": "Logarithmic"},
    "hidden_units": {"type": "Integer", "min_value": 4, "max_value": 128,
                     "scaling_type": "Logarithmic"},
    "alpha": {"type": "Continuous", "min_value": 1e-6, "max_value": 1.0,
              "scaling_type": "Logarithmic"},
    "batch_size": {"type": "Integer", "min_value": 16, "max_value": 512,
                   "scaling_type": "Logarithmic"},
}  # fmt: skip
METHODS: dict[str, dict[str, Any]] = {
    "random_full": {"strategy": "Random"},
    "median_rule": {"strategy": "Random", "training_job_early_stopping_type": "Auto"},
    "hyperband": {"strategy": "Hyperband"},
}
FRACTIONS = {"tenth": 0.1, "third": 1 / 3, "whole": 1.0}
EARLY_STOPPING_TRIALS = 500  # the early-stopping searches run until the budget, not a count
PARALLEL = 2
#: A job's epoch is padded to this pace (the MLP's epoch takes milliseconds): the tuner acts
#: on a value about 0.1 s after it is printed (``tuning_reaction.py``), about an epoch here as
#: it is a small fraction of an epoch in real training.
EPOCH_S = 0.1


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=positive, default=10)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds from this one")
    parser.add_argument("--trials", type=positive, default=30, help="random search's trials")
    parser.add_argument("--max-epochs", type=positive, default=27)
    parser.add_argument("--path", choices=("jobs", "library", "both"), default="both")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RESULTS",
                        help="only merge the runs of these results files into --out")  # fmt: skip
    parser.add_argument("--epoch-seconds", type=float, default=EPOCH_S,
                        help="a job's epoch padded to this pace")  # fmt: skip
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS),
                        help="the searches to run (random_full, the target, always runs)")  # fmt: skip
    args = parser.parse_args()
    args.methods = [m for m in METHODS if m == "random_full" or m in args.methods]
    if args.merge:
        merge(args)
        return
    paths = ("library", "jobs") if args.path == "both" else (args.path,)
    with tempfile.TemporaryDirectory(prefix="trainops-early-stopping-") as tmp:
        digits = Path(tmp) / "digits.npz"
        _digits_mlp.save(_digits_mlp.load_digits_split(), digits)
        src = Path(shutil.copytree(REPO / "src", Path(tmp) / "src",
                                   ignore=shutil.ignore_patterns("__pycache__")))  # fmt: skip
        for path in paths:
            runs: list[dict[str, Any]] = []
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                if path == "library":
                    runs.append(library_seed(digits, seed, args))
                else:
                    work = Path(tmp) / f"seed-{seed}"
                    runs.append(jobs_seed(src, work, digits, seed, args))
                result = report(path, runs, args)
                write(args.out, path, result)  # after each seed: a cut run keeps what it has
            print(json.dumps(result["summary"], indent=2))


def write(out: Path, path: str, result: dict[str, Any]) -> None:
    """Replace ``path``'s part of the results file ``out`` (read again: the other path may be
    running beside this one), atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(out.read_text()) if out.is_file() else {}
    whole = {name: known.get(name) for name in ("library", "jobs")} | {path: result}
    partial = out.with_suffix(f".{path}.tmp")
    partial.write_text(json.dumps(whole, indent=2) + "\n")
    partial.replace(out)


def merge(args: argparse.Namespace) -> None:
    """The seeds of several runs (e.g. side by side, each with its own ``--first-seed``) as one
    result per path, each seed's figures as measured."""
    for path in ("library", "jobs"):
        found = [json.loads(f.read_text()).get(path) for f in args.merge]
        parts = [part for part in found if part]
        if not parts:
            continue
        runs = sorted({r["seed"]: r for part in parts for r in part["runs"]}.values(),
                      key=lambda r: r["seed"])  # fmt: skip
        args.trials, args.max_epochs = parts[0]["random_trials"], parts[0]["max_epochs"]
        args.epoch_seconds = parts[0].get("epoch_seconds") or EPOCH_S
        merged = report(path, runs, args) | {"measured": max(p["measured"] for p in parts),
                                             "merged_from": len(parts)}  # fmt: skip
        write(args.out, path, merged)


def report(path: str, runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    return {
        "task": "numpy MLP on scikit-learn digits, validation log-loss, epochs as the resource",
        "path": path,
        "parallel": PARALLEL if path == "jobs" else 1,
        "epoch_seconds": args.epoch_seconds if path == "jobs" else None,
        "seeds": len(runs),
        "random_trials": args.trials,
        "max_epochs": args.max_epochs,
        "budget_epochs": args.trials * args.max_epochs,
        "summary": summarise(runs),
        "runs": runs,
        "machine": machine(),
        "versions": versions(),
        "measured": datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def config_fields(method: str, seed: int, max_trials: int) -> dict[str, Any]:
    """The tuning job's fields besides its name and training job."""
    return {
        **METHODS[method],
        "objective": {"metric_name": "val_loss", "type": "Minimize"},
        "hyperparameter_ranges": RANGES,
        "resource_limits": {"max_number_of_training_jobs": max_trials,
                            "max_parallel_training_jobs": PARALLEL},
        "random_seed": seed,
    }  # fmt: skip


def _trials(method: str, trials: int) -> int:
    return trials if method == "random_full" else EARLY_STOPPING_TRIALS


def jobs_seed(
    src: Path, work: Path, digits: Path, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The three searches of ``seed`` as tuning jobs on one fresh server (order rotated)."""
    trials, max_epochs = args.trials, args.max_epochs
    prepare_code(work, digits)
    budget = trials * max_epochs
    searches: dict[str, tuple[str, int | None]] = {}
    for method in rotated(args.methods, seed):
        name = f"digits-{method.replace('_', '-')}-{seed}"
        fields = config_fields(method, seed, _trials(method, trials))
        text = tune_yaml(name, fields, seed, max_epochs, args.epoch_seconds)
        (work / f"{method}.yaml").write_text(text)
        searches[method] = (f"{method}.yaml", None if method == "random_full" else budget)
    runs = run_searches(src, work, searches)
    return figures(seed, budget, {method: runs[method] for method in args.methods})


def library_seed(digits: Path, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    data = _digits_mlp.load(digits)
    trials, max_epochs = args.trials, args.max_epochs
    budget = trials * max_epochs
    runs = {m: search_run(data, m, seed, _trials(m, trials), max_epochs, budget)
            for m in args.methods}  # fmt: skip
    return figures(seed, budget, runs)


def search_run(
    data: _digits_mlp.Data, method: str, seed: int, max_trials: int, max_epochs: int, budget: int
) -> dict[str, Any]:
    """One search until ``max_trials`` or ``budget`` epochs: (epochs spent, best) after each
    trial, and how its trials ended."""
    training_job = {
        "entry_point": "train.py",
        "hyperparameters": {"epochs": max_epochs},
        "metric_definitions": [{"name": "val_loss", "regex": "val_loss=([0-9.]+)"}],
    }
    name = f"digits-{method.replace('_', '-')}-{seed}"
    fields = config_fields(method, seed, max_trials)
    search = Search(TuningJobConfig(tuning_job_name=name, training_job=training_job, **fields))
    spent, best, trace, stopped = 0, math.inf, [], 0
    started = time.perf_counter()
    while spent < budget and (proposal := search.ask()) is not None:
        number, last = proposal.number, math.nan
        status = TrialStatus.COMPLETED
        curve = _digits_mlp.learning_curve(data, proposal.hyperparameters, seed, max_epochs)
        for epoch, last in enumerate(curve, start=1):
            spent += 1
            if search.should_stop(number, epoch, last):
                status = TrialStatus.STOPPED
                break
        search.tell(number, status, None if status is TrialStatus.STOPPED else last)
        stopped += status is TrialStatus.STOPPED
        if math.isfinite(last) and last < best:
            best = last
        trace.append([spent, best])
    return {"trials": len(trace), "stopped": stopped, "epochs": spent, "trace": trace,
            "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip


def figures(seed: int, budget: int, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each search's epochs to random search's final best and its best at each fraction."""
    target = runs["random_full"]["trace"][-1][1]
    for run in runs.values():
        reached = next((spent for spent, best in run["trace"] if best <= target), None)
        run["epochs_to_random_best"] = reached
        run["fraction_of_budget"] = None if reached is None else round(reached / budget, 3)
        run["best_at"] = {name: best_within(run["trace"], f * budget)
                          for name, f in FRACTIONS.items()}  # fmt: skip
    print(f"seed {seed}: " + ", ".join(
        f"{m} best {r['best_at']['whole']} reached random's at {r['fraction_of_budget']}"
        f" ({r['trials']} trials, {r['stopped']} stopped, {r['seconds']} s)"
        for m, r in runs.items()), flush=True)  # fmt: skip
    return {"seed": seed, "random_best": target, "budget": budget, "methods": runs}


def best_within(trace: list[list[float]], epochs: float) -> float | None:
    """The best after the last trial that ended within ``epochs`` epochs spent."""
    bests = [best for spent, best in trace if spent <= epochs and math.isfinite(best)]
    return bests[-1] if bests else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in METHODS:
        mine = [run["methods"][method] for run in runs if method in run["methods"]]
        if not mine:
            continue
        fractions = [m["fraction_of_budget"] for m in mine]
        reached = sorted(f for f in fractions if f is not None)
        out[method] = {
            "fraction_of_budget_to_random_best": fractions,
            "seeds_within_a_third": sum(f <= 1 / 3 for f in reached),
            "fraction": spread([f if f is not None else math.inf for f in fractions]),
            "best_at": {name: spread([m["best_at"][name] for m in mine]) for name in FRACTIONS},
            "median_trials": statistics.median(m["trials"] for m in mine),
            "median_stopped": statistics.median(m["stopped"] for m in mine),
            "median_epochs": statistics.median(m["epochs"] for m in mine),
        }
    return out


def spread(values: list[float | None]) -> dict[str, float | None]:
    """Median and interquartile range (a seed that never reached counts as infinite)."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"median": None, "q1": None, "q3": None}
    if len(known) == 1:
        q1 = middle = q3 = known[0]
    else:
        q1, middle, q3 = statistics.quantiles(known, n=4, method="inclusive")
    return {k: round(v, 4) if math.isfinite(v) else None
            for k, v in (("median", middle), ("q1", q1), ("q3", q3))}  # fmt: skip


if __name__ == "__main__":
    main()
