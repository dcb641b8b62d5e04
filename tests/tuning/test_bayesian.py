"""The Bayesian strategy: Optuna's GP sampler where torch is installed, TPE without it or with a
broken install (and for Hyperband); torch imported only once a Bayesian job proposes; parallel
trials kept apart; and a rebuilt search without torch proposing what the uninterrupted one
would."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.tuning.test_search import RANGES, _config, _run
from trainops.tuning import Search, TrialStatus
from trainops.tuning._strategies import _gp_imports, strategy_for

pytestmark = pytest.mark.usefixtures("optuna")


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """torch as if it were not installed (the GP check is made again, and again after)."""
    _gp_imports.cache_clear()
    monkeypatch.setitem(sys.modules, "torch", None)
    yield
    _gp_imports.cache_clear()


#: the search tests' Continuous ranges (log and reverse log), which their curve reads
CONTINUOUS = {k: RANGES[k] for k in ("lr", "momentum")}
SQUARE = {
    "x": {"type": "Continuous", "min_value": 0.0, "max_value": 1.0},
    "y": {"type": "Continuous", "min_value": 0.0, "max_value": 1.0},
}


def _sampler_name(strategy: str, ranges: dict[str, Any] = SQUARE) -> str:
    config = _config(strategy, hyperparameter_ranges=ranges)
    return type(strategy_for(config, "job").sampler(1)).__name__


def test_bayesian_is_the_gp_over_continuous_ranges_with_torch() -> None:
    require_extra("torch")
    assert _sampler_name("Bayesian") == "GPSampler"
    assert _sampler_name("Hyperband") == "TPESampler"  # learns from the stopped trials too
    assert _sampler_name("Bayesian", dict(SQUARE, n={"type": "Integer", "min_value": 1,
                                                     "max_value": 9})) == "TPESampler"  # fmt: skip
    assert _sampler_name("Bayesian", dict(SQUARE, o=["a", "b"])) == "TPESampler"


@pytest.mark.usefixtures("no_torch")
def test_bayesian_is_tpe_without_torch() -> None:
    assert _sampler_name("Bayesian") == "TPESampler"


@pytest.mark.usefixtures("no_torch")
def test_without_torch_a_rebuilt_search_proposes_what_the_uninterrupted_one_would() -> None:
    config = _config("Bayesian", hyperparameter_ranges=CONTINUOUS)
    first = Search(config)
    _run(first, 14)
    rebuilt = Search(config, first.records)
    assert _run(first, 5) == _run(rebuilt, 5)


def _ask_four(then: TrialStatus | None) -> list[tuple[float, float]]:
    """Four proposals after ten completed trials of a bowl; ``then``: how each ends at once
    (``None``: they stay running, as parallel trials do)."""
    limits = {"max_number_of_training_jobs": 20, "max_parallel_training_jobs": 4}
    search = Search(_config("Bayesian", hyperparameter_ranges=SQUARE, resource_limits=limits))
    for _ in range(10):
        proposal = search.ask()
        assert proposal is not None
        x, y = (float(proposal.hyperparameters[k]) for k in ("x", "y"))
        search.tell(proposal.number, TrialStatus.COMPLETED, (x - 0.3) ** 2 + (y - 0.6) ** 2)
    points = []
    for _ in range(4):
        proposal = search.ask()
        assert proposal is not None
        points.append((float(proposal.hyperparameters["x"]), float(proposal.hyperparameters["y"])))
        if then is not None:
            search.tell(proposal.number, then)
    return points


def _closest(points: list[tuple[float, float]]) -> float:
    return min(math.dist(a, b) for i, a in enumerate(points) for b in points[i + 1 :])


@pytest.mark.slow
def test_the_gp_keeps_running_trials_apart() -> None:
    require_extra("torch")
    # trials that failed teach the GP nothing: it proposes the same point again and again...
    assert _closest(_ask_four(then=TrialStatus.FAILED)) < 1e-3
    # ...while running ones are taken into account (q-batch expected improvement)
    assert _closest(_ask_four(then=None)) > 0.01


def _loaded_after(statement: str) -> bool:
    code = f"import sys\n{statement}\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()[-1] == "True"


def test_a_search_is_made_without_importing_torch() -> None:
    statement = "from tests.tuning.test_search import _config; from trainops.tuning import Search"
    statement += "\nfrom tests.tuning.test_bayesian import SQUARE"
    assert not _loaded_after(
        statement + "\nSearch(_config('Bayesian', hyperparameter_ranges=SQUARE))"
    )


def test_a_broken_torch_means_tpe_not_a_failed_tuning_job(tmp_path: Path) -> None:
    broken = tmp_path / "torch"
    broken.mkdir()
    (broken / "__init__.py").write_text('raise ImportError("libtorch_cpu.so: no such file")\n')
    code = (
        "from tests.tuning.test_search import RANGES, _config, _run\n"
        "from trainops.tuning import Search\n"
        "from tests.tuning.test_bayesian import CONTINUOUS\n"
        "search = Search(_config('Bayesian', hyperparameter_ranges=CONTINUOUS))\n"
        "_run(search, 16, leave_running=False)\n"
        "print(type(search._strategy.sampler(1)).__name__, len(search.records))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.split() == ["TPESampler", "16"]
