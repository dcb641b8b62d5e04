"""The cheapest configuration of a study that meets a deadline, figures worked out by hand.

ml.m5.large: 0.115 USD/h on-demand, 0.0345 USD/h spot (the catalog's estimate), spot 10 % longer:

    config  hosts  time     on-demand                       spot
    1x1     1      1000 s   1000/3600 x 0.115     = 0.031944   1100 s, 0.010542
    1x2     1       600 s    600/3600 x 0.115     = 0.019167    660 s, 0.006325
    2x1     2       400 s    400/3600 x 0.115 x 2 = 0.025556    440 s, 0.008433
    2x2     2      failed before the target: no time, misses any deadline

Deadline 620 s: on-demand in time are 1x2 and 2x1, the cheaper 1x2; at spot only 2x1 is in
time (1x2 takes 660 s); one host: 1x2 on-demand; several: 2x1 at spot; missed: 1x1 and 2x2.
"""

from __future__ import annotations

import pytest

from trainops.cost import StudyRun, choose_for_deadline, prices_of, render_deadline


def _run(count: int, per_host: int, seconds: float | None, status: str = "Completed") -> StudyRun:
    return StudyRun(label=f"{count}x{per_host}", instance_type="ml.m5.large",
                    instance_count=count, processes_per_host=per_host,
                    job_name=f"job-{count}-{per_host}", status=status, throughput=100.0,
                    time_to_target_s=seconds, billable_seconds=50, cost_usd=0.0)  # fmt: skip


RUNS = [_run(1, 1, 1000.0), _run(1, 2, 600.0), _run(2, 1, 400.0), _run(2, 2, None, "Failed")]


def test_the_cheapest_in_time_on_demand_at_spot_and_by_shape() -> None:
    choice = choose_for_deadline(RUNS, 620.0, lambda k: prices_of(k), 0.1)
    assert choice.on_demand is not None and choice.spot is not None
    assert (choice.on_demand.run.label, choice.on_demand.usd) == (
        "1x2",
        pytest.approx(0.019167, abs=1e-6),
    )
    assert (choice.spot.run.label, choice.spot.seconds) == ("2x1", pytest.approx(440.0))
    assert choice.spot.usd == pytest.approx(0.008433, abs=1e-6)
    assert choice.spot.price_kind == "estimate"
    assert choice.scale_up is not None and choice.scale_out is not None
    assert (choice.scale_up.run.label, choice.scale_up.spot) == ("1x2", False)
    assert (choice.scale_out.run.label, choice.scale_out.spot) == ("2x1", True)
    assert [r.label for r in choice.missed] == ["1x1", "2x2"]
    text = render_deadline(choice, "test_accuracy")
    assert text.splitlines()[0] == (
        "Deadline 620 s (to test_accuracy; spot takes 10% longer for its interruptions):"
    )
    assert "  cheapest spot       2x1, spot: 440 s, $0.008433, an estimate" in text
    assert text.endswith("  missed: 1x1; 2x2")


def test_without_a_target_the_time_is_the_billable_time_of_a_completed_job() -> None:
    runs = [_run(1, 1, None), _run(2, 1, None, "Failed")]  # billable 50 s each
    choice = choose_for_deadline(runs, 55.0, lambda k: prices_of(k), 0.0)
    assert choice.on_demand is not None and choice.on_demand.seconds == 50.0
    assert choice.spot is not None and choice.spot.usd == pytest.approx(50 / 3600 * 0.0345)
    assert [r.label for r in choice.missed] == ["2x1"]  # a failed job never finished


def test_a_deadline_nothing_meets_says_so() -> None:
    choice = choose_for_deadline(RUNS, 10.0, lambda k: prices_of(k), 0.1)
    assert choice.on_demand is None and choice.spot is None
    assert "cheapest on-demand  none in time" in render_deadline(choice, None)
    assert choice.to_json()["cheapest_spot"] is None
