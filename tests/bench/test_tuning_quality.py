"""bench/tuning_quality.py's bookkeeping: each run's regrets are kept by seed, a run already
measured is not measured again, part files are united run by run, and a cell over fewer seeds
than its row says so. The engines are not run here (the random search alone, on Branin)."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.bench._load import load_bench


@pytest.fixture(scope="module")
def tq() -> ModuleType:
    return load_bench("tuning_quality")


def _run(regret: float, seconds: float = 1.0) -> dict[str, float]:
    return {"10": regret * 4, "25": regret * 2, "50": regret, "seconds": seconds}


def test_figures_are_quartiles_over_the_seeds_and_imported_runs_count_where_they_can(
    tq: ModuleType,
) -> None:
    runs = {"0": _run(1.0), "1": _run(3.0), "2": {"50": 2.0, "seconds": 5.0}}
    figures = tq._figures(runs, 50, 1)
    assert figures["seeds"] == 3 and figures["seconds"] == 7.0
    assert figures["regret"]["50"]["median"] == 2.0 and figures["regret"]["50"]["seeds"] == 3
    assert figures["regret"]["10"]["seeds"] == 2  # the imported run has its final regret only
    assert figures["final_regrets"] == [1.0, 3.0, 2.0]


def test_a_cell_over_fewer_seeds_says_how_many(tq: ModuleType) -> None:
    q = {"median": 0.5, "q1": 0.25, "q3": 1.0, "seeds": 2}
    assert tq._cell(q, 3) == "0.5 [0.25, 1] (2 seeds)"
    assert tq._cell({**q, "seeds": 3}, 3) == "0.5 [0.25, 1]"
    assert tq._cell(None, 3) == ""


def _part(path: Path, tq: ModuleType, runs: dict[str, Any]) -> Path:
    result = {"budget": 50, "versions": {"optuna": "5", "smac": None}, "tasks": {}}
    result["tasks"]["Branin"] = {"smac_hpo": tq._figures(runs, 50, 1)}
    tq._save(path, result)
    return path


def test_merging_parts_unites_their_runs(tq: ModuleType, tmp_path: Path) -> None:
    first = _part(tmp_path / "a.json", tq, {"0": _run(1.0), "1": _run(2.0)})
    second = _part(tmp_path / "b.json", tq, {"2": _run(3.0), "3": _run(4.0)})
    merged = tq.merge([first, second])["tasks"]["Branin"]["smac_hpo"]
    assert sorted(merged["runs"], key=int) == ["0", "1", "2", "3"]
    assert merged["seeds"] == 4 and merged["regret"]["50"]["median"] == 2.5


def test_measuring_again_keeps_the_runs_already_there(tq: ModuleType, tmp_path: Path) -> None:
    require_extra("tuning")
    out = tmp_path / "r.json"
    branin = tq.all_tasks(["Branin"])
    tq.measure(branin, ["trainops_random_2x"], range(2), 5, out)
    first = tq._load(out)["tasks"]["Branin"]["trainops_random_2x"]
    assert sorted(first["runs"]) == ["0", "1"]
    first["runs"]["1"]["seconds"] = -1.0  # a mark: a run measured again would lose it
    tq._save(out, {**tq._load(out), "tasks": {"Branin": {"trainops_random_2x": first}}})
    tq.measure(branin, ["trainops_random_2x"], range(3), 5, out)
    again = tq._load(out)["tasks"]["Branin"]["trainops_random_2x"]
    assert sorted(again["runs"]) == ["0", "1", "2"] and again["runs"]["1"]["seconds"] == -1.0


def test_a_part_file_that_is_not_one_of_ours_is_refused_in_one_line(
    tq: ModuleType, tmp_path: Path
) -> None:
    good = _part(tmp_path / "a.json", tq, {"0": _run(1.0), "1": _run(2.0)})
    cases = {
        "not json": "not a results file (Expecting value",
        "[1, 2]": "not a results file of this benchmark (no budget)",
        '{"budget": 50, "tasks": {"Branin": {"rm -rf": {}}}}': "unknown engines rm -rf",
    }
    for text, message in cases.items():
        bad = tmp_path / "bad.json"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(SystemExit, match=re.escape(message)):
            tq.merge([good, bad])
    with pytest.raises(SystemExit, match="none of the part files exists"):
        tq.merge([tmp_path / "missing.json"])
