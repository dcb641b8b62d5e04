"""bench/tuning_overhead.py's floor and summary: the bare-process path runs every trial as its
own ``python train.py`` process, ``parallel`` at a time, and fails on a trial that does not
print its objective; the summary puts each path's overhead against Ray Tune's."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench._load import load_bench


@pytest.fixture(scope="module")
def to() -> ModuleType:
    return load_bench("tuning_overhead")


def test_bare_processes_run_each_trial_as_a_process_of_the_script(
    to: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = tmp_path / "count"
    # Each trial appends a line: the count says how many processes ran, the lines how many at once.
    monkeypatch.setattr(
        to,
        "SCRIPT",
        to.SCRIPT + f"open({str(counted)!r}, 'a').write(str(__import__('os').getpid()) + '\\n')\n",
    )
    figures = to.bare_round(tmp_path, trials=5, parallel=2)
    pids = counted.read_text().split()
    assert len(pids) == 5 and len(set(pids)) == 5
    assert figures["wall_s"] >= 3 * to.TRIAL_S  # 5 trials of 0.1 s, 2 at a time: 3 waves at least


def test_a_trial_without_its_objective_fails_the_round(
    to: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(to, "SCRIPT", "import sys\nsys.exit(0)\n")
    with pytest.raises(AssertionError):
        to.bare_round(tmp_path, trials=2, parallel=2)


def test_the_summary_sets_each_path_against_ray_tune(to: ModuleType) -> None:
    args = argparse.Namespace(trials=100, parallel=2, baseline=None)
    rounds = {
        "trainops": [{"wall_s": 10.0, "mean_trial_training_s": 0.15}],
        "ray_tune": [{"wall_s": 6.0}],
        "bare_processes": [{"wall_s": 5.5}],
    }
    summary = to.summary(rounds, args, ideal=5.0)["summary"]
    assert summary["trainops"]["overhead_per_trial_s"] == 0.1
    assert summary["ray_tune"]["overhead_per_trial_s"] == 0.02
    assert summary["bare_processes"]["overhead_per_trial_s"] == 0.01
    assert summary["trainops_overhead_vs_ray_tune"] == 5.0
    assert summary["bare_processes_overhead_vs_ray_tune"] == 0.5
