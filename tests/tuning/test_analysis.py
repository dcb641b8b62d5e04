"""The tuning analysis as data: the best-so-far line, slices, a deterministic parameter
importance that finds the parameter that matters, each trial's cost and the total, the compute
early stopping saved (against the budget it would have run), and the page and PNGs drawn from
it, with hostile names escaped."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.tuning.conftest import make_config
from trainops.tuning.analysis import (
    TrialFacts,
    TuningAnalysis,
    analyse,
    explained_share,
    plot_pngs,
    render_html,
    write_report,
)


def _facts(
    number: int, objective: float | None, status: str = "Completed", **more: Any
) -> TrialFacts:
    values = {"lr": 0.001 * (number + 1), "batch_size": 16 + number, "optimizer": "sgd"}
    values.update(more.pop("hyperparameters", {}))
    return TrialFacts(number=number, training_job=f"t-{number:03d}", status=status,
                      hyperparameters=values, objective=objective, **more)  # fmt: skip


def test_the_best_so_far_follows_the_objective_type_in_trial_order() -> None:
    trials = [_facts(0, 0.5), _facts(1, 0.7), _facts(2, None, "Failed"), _facts(3, 0.2),
              _facts(4, math.nan), _facts(5, 0.3, "Stopped")]  # fmt: skip
    lows = analyse("t", make_config(), trials)
    assert [t.best_so_far for t in lows.trials] == [0.5, 0.5, 0.5, 0.2, 0.2, 0.2]
    assert lows.best() is not None and lows.best().number == 3  # type: ignore[union-attr]
    maximize = make_config(objective={"metric_name": "loss", "type": "Maximize"})
    highs = analyse("t", maximize, list(reversed(trials)))
    assert [t.best_so_far for t in highs.trials] == [0.5, 0.7, 0.7, 0.7, 0.7, 0.7]
    assert highs.best().number == 1  # type: ignore[union-attr]


def test_slices_hold_each_tuned_parameter_with_its_scale() -> None:
    found = analyse("t", make_config(), [_facts(0, 0.5), _facts(1, None, "Failed")]).slices
    assert [(s.parameter, s.scale) for s in found] == [
        ("batch_size", "Linear"), ("lr", "Logarithmic"), ("optimizer", "Categorical"),
    ]  # fmt: skip
    assert [(p.value, p.objective, p.number) for p in found[1].points] == [(0.001, 0.5, 0)]


def test_importance_finds_the_parameter_that_matters_and_is_deterministic() -> None:
    rng = random.Random(3)
    trials = []
    for n in range(40):
        lr, batch = 10 ** rng.uniform(-4, -1), rng.randint(16, 128)
        optimizer = rng.choice(["sgd", "adam"])
        loss = (math.log10(lr) + 2.5) ** 2 + rng.gauss(0, 0.05)  # only lr matters
        trials.append(_facts(n, loss, hyperparameters={"lr": lr, "batch_size": batch,
                                                       "optimizer": optimizer}))  # fmt: skip
    first = analyse("t", make_config(), trials)
    again = analyse("t", make_config(), list(reversed(trials)))
    assert first.importance == again.importance
    assert first.importance_trials == 40
    ranked = {i.parameter: i.importance for i in first.importance}
    assert max(ranked, key=lambda k: ranked[k]) == "lr" and ranked["lr"] > 0.8
    assert math.isclose(sum(ranked.values()), 1.0)


def test_the_explained_share_is_zero_without_an_effect_and_one_for_a_perfect_split() -> None:
    assert explained_share([[1.0, 1.0], [1.0, 1.0]]) == 0.0
    assert explained_share([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]) == 1.0
    assert explained_share([[0.0, 1.0], [0.0, 1.0]]) == 0.0  # means equal: nothing explained
    assert explained_share([[5.0]]) == 0.0


def test_importance_needs_three_completed_trials_and_leaves_out_stopped_ones() -> None:
    trials = [_facts(0, 0.1), _facts(1, 0.2), _facts(2, 0.3, "Stopped"), _facts(3, math.nan)]
    found = analyse("t", make_config(), trials)
    assert found.importance == [] and found.importance_trials == 2


def test_cost_per_trial_and_total() -> None:
    trials = [
        _facts(0, 0.5, seconds=100.0, cost_usd=0.25),
        _facts(1, 0.4, seconds=60, cost_usd=0.5),
    ]
    found = analyse("t", make_config(), trials)
    assert [t.cost_usd for t in found.trials] == [0.25, 0.5]
    assert (found.total_seconds, found.total_cost_usd) == (160.0, 0.75)


def test_early_stopping_savings_count_the_steps_not_run_at_the_trials_pace() -> None:
    rate = 0.01  # USD per second
    trials = [
        _facts(0, 0.3, steps=9, seconds=90, usd_per_second=rate, seconds_per_step=10.0),
        _facts(1, 0.9, "Stopped", steps=3, seconds=35, usd_per_second=rate, early_stopped=True,
               seconds_per_step=10.0),
        # Stopped after one value: the median measured pace (10 s) stands in for its own.
        _facts(2, 0.9, "Stopped", steps=1, seconds=15, usd_per_second=rate, early_stopped=True),
        # Stopped because the tuning job ended: not a saving of early stopping.
        _facts(3, 0.5, "Stopped", steps=2, seconds=25, usd_per_second=rate, seconds_per_step=10.0),
    ]  # fmt: skip
    # Median rule (not Hyperband): the budget is the most steps a Completed trial reported.
    saved = analyse("t", make_config(), trials).early_stopping
    assert (saved.budget_steps, saved.stopped_trials, saved.saved_steps) == (9, 2, 6 + 8)
    assert saved.budget_source.startswith("the most objective values a Completed trial")
    assert saved.saved_seconds == pytest.approx(140.0)
    assert saved.saved_cost_usd == pytest.approx(1.4)
    assert saved.saved_share == pytest.approx(140 / (165 + 140))
    hyperband = make_config(strategy="Hyperband",
                            strategy_config={"hyperband_strategy_config": {"max_resource": 27}})  # fmt: skip
    by_resource = analyse("t", hyperband, trials).early_stopping
    assert (by_resource.budget_steps, by_resource.saved_steps) == (27, 24 + 26)
    # No trial completed and no Hyperband: the static epochs (9 in the config) is the budget.
    unfinished = analyse("t", make_config(), trials[1:]).early_stopping
    assert (unfinished.budget_steps, unfinished.budget_source) == (
        9, "the static hyperparameter epochs",
    )  # fmt: skip


def test_the_data_round_trips_through_json_with_nan_as_null() -> None:
    trials = [_facts(0, 0.5, seconds=10, cost_usd=0.1), _facts(1, math.nan),
              _facts(2, 0.2), _facts(3, 0.4)]  # fmt: skip
    found = analyse("t", make_config(), trials)
    text = json.dumps(found.to_json(), allow_nan=False)
    data = json.loads(text)
    assert data["trials"][1]["objective"] is None
    assert "importance_method" in data and "saved_share" in data["early_stopping"]
    again = TuningAnalysis.from_json(data)
    assert again.trials[0] == found.trials[0] and again.importance == found.importance
    assert again.slices[0] == found.slices[0]


HOSTILE = '<script>alert("x")</script>$\\frac{'
HOSTILE_VALUE = '"><img src=x onerror=alert(1)>'


def _hostile_analysis() -> TuningAnalysis:
    config = make_config(
        tuning_job_name="hostile",
        hyperparameter_ranges={
            HOSTILE: {"type": "Continuous", "min_value": 0.001, "max_value": 1},
            "kind": [HOSTILE_VALUE, "$x^$"],
        },
    )
    trials = [
        TrialFacts(n, f"hostile-{n:03d}", "Completed",
                   {HOSTILE: 0.01 * (n + 1), "kind": [HOSTILE_VALUE, "$x^$"][n % 2]},
                   objective=1.0 / (n + 1), steps=3, seconds=5.0, cost_usd=0.01)
        for n in range(5)
    ]  # fmt: skip
    return analyse("hostile", config, trials)


def test_the_page_escapes_every_user_string_and_fetches_nothing() -> None:
    page = render_html(_hostile_analysis(), {"objective": b"\x89PNG fake"})
    assert "<script" not in page and "<img src=x" not in page
    assert "&lt;script&gt;" in page and "&quot;&gt;&lt;img src=x onerror" in page
    assert "http://" not in page and "https://" not in page
    assert "Content-Security-Policy" in page and 'src="data:image/png;base64,' in page
    assert "Figures need matplotlib" in render_html(_hostile_analysis())


def test_the_report_is_written_as_pngs_a_page_and_its_data(tmp_path: Any) -> None:
    require_extra("dev", "matplotlib")
    analysis = _hostile_analysis()
    pngs = plot_pngs(analysis)  # math mode off: the hostile '$' names draw as text
    assert set(pngs) == {"objective", "slices", "importance"}
    assert all(data.startswith(b"\x89PNG\r\n\x1a\n") for data in pngs.values())
    written = write_report(analysis, tmp_path / "out")
    assert sorted(p.name for p in written) == [
        "analysis.json", "importance.png", "index.html", "objective.png", "slices.png",
    ]  # fmt: skip
    assert json.loads((tmp_path / "out" / "analysis.json").read_text())["name"] == "hostile"
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


def test_the_public_names_resolve_and_matplotlib_waits_for_a_figure() -> None:
    import trainops.tuner as tuner
    import trainops.tuning.analysis as analysis

    assert [n for n in analysis.__all__ if getattr(analysis, n, None) is None] == []
    assert tuner.analyse_tuning_job is not None and tuner.EARLY_STOP_PREFIX
    code = "import sys, trainops.tuning.analysis; print('matplotlib' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_the_data_of_a_newer_server_is_read_leaving_out_what_it_added() -> None:
    data = analyse("t", make_config(), [_facts(0, 0.5), _facts(1, 0.4)]).to_json()
    data["added_later"] = 1
    data["trials"][0]["added_later"] = 2
    data["early_stopping"]["added_later"] = 3
    assert TuningAnalysis.from_json(data).trials[0].number == 0
    del data["trials"]
    with pytest.raises(KeyError):
        TuningAnalysis.from_json(data)
