"""Early stopping on real learning curves: Hyperband and the median rule against random search
with every trial run to its full budget, by the best objective reached against the epochs spent.

    python bench/tuning_early_stopping.py [--seeds 5] [--trials 30] [--max-epochs 27]

The trials are real training: a one-hidden-layer MLP (scikit-learn's ``MLPClassifier``, Adam,
one ``partial_fit`` pass over the training set per epoch) on scikit-learn's digits (1,797 8x8
images; a fixed two-thirds / one-third split, standardised), tuned over the learning rate, the
hidden width, the L2 penalty and the batch size; the objective is the validation log-loss
(minimised) after each epoch, and the epoch is the resource. Each trial's training is seeded by
the benchmark seed and the trial's number, so a run is repeatable.

The searches are trainops' own :class:`~trainops.tuning.Search` (the library the tuner drives)
run here in one process, one trial at a time, not through the server and its training jobs: the
learning curves and the search's decisions are what is measured, not the job path (see
``tuning_overhead.py`` for that). Per seed:

- ``random_full``: ``Random``, early stopping ``Off``, ``--trials`` trials of ``--max-epochs``
  each; its total epochs are the budget and its best is the target.
- ``median_rule``: ``Random`` proposals with early stopping ``Auto`` (SageMaker's median rule).
- ``hyperband``: trainops' ``Hyperband`` (its Bayesian proposals; min resource 1, max
  ``--max-epochs``, reduction factor 3).

The early-stopping searches run until they have spent the same budget of epochs. A trial's
objective is its last value (a stopped trial's last intermediate value, as SageMaker counts it).
Figures: for each seed, the epochs each search needed before its best reached random search's
final best (its fraction of random's budget; the target is at most a third), and each search's
best at a tenth, a third and the whole of the budget (medians over the seeds). Writes
results/tuning_early_stopping.json.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
import warnings
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from _report import machine, positive, versions

from trainops.tuning import Search, TrialStatus, TunedValue, TuningJobConfig

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
Data = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=positive, default=5)
    parser.add_argument("--trials", type=positive, default=30, help="random search's trials")
    parser.add_argument("--max-epochs", type=positive, default=27)
    args = parser.parse_args()
    data = digits()
    runs: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        runs.append(run_seed(data, seed, args.trials, args.max_epochs))
        write(runs, args)  # after each seed: a long run interrupted keeps the seeds it finished
    print(json.dumps(summarise(runs), indent=2))


def write(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    result = {
        "task": "MLP on scikit-learn digits, validation log-loss, epochs as the resource",
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
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


def digits() -> Data:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=1 / 3, random_state=0,
                                                      stratify=y)  # fmt: skip
    scaler = StandardScaler().fit(x_train)
    return scaler.transform(x_train), y_train, scaler.transform(x_val), y_val


def learning_curve(
    data: Data, hp: Mapping[str, TunedValue], seed: int, epochs: int
) -> Iterator[float]:
    """The validation log-loss after each epoch of training with ``hp`` (NaN once diverged)."""
    from sklearn.metrics import log_loss
    from sklearn.neural_network import MLPClassifier

    x_train, y_train, x_val, y_val = data
    classes = np.arange(10)
    model = MLPClassifier(
        hidden_layer_sizes=(int(hp["hidden_units"]),),
        learning_rate_init=float(hp["learning_rate"]),
        alpha=float(hp["alpha"]),
        batch_size=int(hp["batch_size"]),
        random_state=seed,
    )
    for _ in range(epochs):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            model.partial_fit(x_train, y_train, classes=classes)
            proba = model.predict_proba(x_val)
        if not np.all(np.isfinite(proba)):
            yield math.nan
            return
        yield float(log_loss(y_val, proba, labels=classes))


def config(method: str, seed: int, max_trials: int, max_epochs: int) -> TuningJobConfig:
    return TuningJobConfig(
        tuning_job_name=f"digits-{method.replace('_', '-')}-{seed}",
        training_job={
            "entry_point": "train.py",
            "hyperparameters": {"epochs": max_epochs},
            "metric_definitions": [{"name": "val_loss", "regex": "val_loss=([0-9.]+)"}],
        },
        objective={"metric_name": "val_loss", "type": "Minimize"},
        hyperparameter_ranges=RANGES,
        resource_limits={"max_number_of_training_jobs": max_trials,
                         "max_parallel_training_jobs": 1},
        random_seed=seed,
        **METHODS[method],
    )  # fmt: skip


def search_run(
    data: Data, method: str, seed: int, max_trials: int, max_epochs: int, budget: int
) -> dict[str, Any]:
    """One search until ``max_trials`` or ``budget`` epochs: (epochs spent, best) after each
    trial, and how its trials ended."""
    search = Search(config(method, seed, max_trials, max_epochs))
    spent, best, trace, stopped = 0, math.inf, [], 0
    started = time.perf_counter()
    while spent < budget and (proposal := search.ask()) is not None:
        number, last = proposal.number, math.nan
        status = TrialStatus.COMPLETED
        curve = learning_curve(data, proposal.hyperparameters, seed * 10_000 + number, max_epochs)
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


def run_seed(data: Data, seed: int, trials: int, max_epochs: int) -> dict[str, Any]:
    budget = trials * max_epochs
    runs = {"random_full": search_run(data, "random_full", seed, trials, max_epochs, budget)}
    for method in ("median_rule", "hyperband"):
        runs[method] = search_run(data, method, seed, 500, max_epochs, budget)
    target = runs["random_full"]["trace"][-1][1]
    for run in runs.values():
        reached = next((spent for spent, best in run["trace"] if best <= target), None)
        run["epochs_to_random_best"] = reached
        run["fraction_of_budget"] = None if reached is None else round(reached / budget, 3)
        run["best_at"] = {name: best_within(run["trace"], f * budget)
                          for name, f in FRACTIONS.items()}  # fmt: skip
    print(f"seed {seed}: " + ", ".join(
        f"{m} best {r['best_at']['whole']:.4f} reached random's at {r['fraction_of_budget']}"
        for m, r in runs.items()), flush=True)  # fmt: skip
    return {"seed": seed, "random_best": target, "budget": budget, "methods": runs}


def best_within(trace: list[list[float]], epochs: float) -> float | None:
    """The best after the last trial that ended within ``epochs`` epochs spent."""
    bests = [best for spent, best in trace if spent <= epochs and math.isfinite(best)]
    return bests[-1] if bests else None


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in METHODS:
        mine = [run["methods"][method] for run in runs]
        fractions = [m["fraction_of_budget"] for m in mine]
        reached = sorted(f for f in fractions if f is not None)
        out[method] = {
            "fraction_of_budget_to_random_best": fractions,
            "seeds_within_a_third": sum(f <= 1 / 3 for f in reached),
            "median_fraction": _median([f if f is not None else math.inf for f in fractions]),
            "median_best_at": {
                name: _median([m["best_at"][name] for m in mine]) for name in FRACTIONS
            },
            "median_trials": statistics.median(m["trials"] for m in mine),
            "median_stopped": statistics.median(m["stopped"] for m in mine),
        }
    return out


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    middle = statistics.median(known)
    return round(middle, 4) if math.isfinite(middle) else None


if __name__ == "__main__":
    main()
