"""Cost advice on recorded data: a job twice interrupted, built through the real store, and every
figure worked out by hand below.

The job (2 x ml.p3.2xlarge: 3.825 USD/h on-demand, 1.1475 USD/h spot estimate), created at 1000:

    Starting 1000, Downloading 1010, Training 1020               attempt 1 trains
    Interrupted 1620 (hosts down 1650), Pending 1650, Starting 1750, Downloading 1760
    Training 1780                                                attempt 2 (restored at 1770)
    Interrupted 2380 (hosts down 2390), Pending 2390, Starting 2400
    Training 2420, Uploading 3020, Completed 3030                attempt 3 (restored nothing)

Checkpoints: attempt 1, algo-1 synced writes of 1320 and 1560, algo-2 synced 1320 and then
failed to sync 1560: the state both hosts hold is 1320, so interruption 1 lost 1620 - 1320 =
300 s. Attempt 2, only algo-1 syncs: 2080, and 2385 in the notice window (interrupted at 2380):
interruption 2 lost nothing (algo-2's sync in the notice was incomplete: it counts for nothing).

- billable: (1650 - 1020) + (2390 - 1780) + (3030 - 2420) = 630 + 610 + 610 = 1850 s
- on-demand: 1850 / 3600 x 3.825 x 2 = 3.93125; spot: 1850 / 3600 x 1.1475 x 2 = 1.179375
- restarts: 1780 - 1620 = 160 s and 2420 - 2380 = 40 s (median R = 100)
- C: the median write time of the synced checkpoints [4, 4, 5, 6, 2] = 4 s
- tau: algo-1's gaps within an attempt, 1560 - 1320 = 240 and 2385 - 2080 = 305: median 272.5
- at 2 interruptions per hour (M = 1800 s): tau* = sqrt(2 x 4 x 1800) = 120 s;
  overhead at tau* = 4/120 + (60 + 100)/1800 = 0.122222, at tau = 4/272.5 + (136.25 + 100)/1800
  = 0.145929; expected loss per interruption 160 s at tau*, 236.25 s at tau.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cost._recorded import NAME, finish, open_store, record
from trainops._errors import JobNotFoundError
from trainops.catalog._settings import SpotPriceSettings
from trainops.cost import job_cost, job_spot_cost, young_daly_interval
from trainops.store import CheckpointRecord, MetadataStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = open_store(tmp_path / "trainops.db")
    yield opened
    opened.close()


def test_a_finished_jobs_cost_interruptions_and_interval_match_the_hand_figures(
    store: MetadataStore,
) -> None:
    finish(store)
    cost = job_spot_cost(store, NAME, SpotPriceSettings(), now=9999.0, interruptions_per_hour=2)
    assert not cost.running and cost.billable_seconds == pytest.approx(1850.0)
    assert cost.on_demand_usd == pytest.approx(3.93125)
    assert cost.spot_usd == pytest.approx(1.179375)
    first, second = cost.interruptions
    assert (first.at, first.saved_at, first.lost_seconds) == (1620.0, 1320.0, 300.0)
    assert (first.restart_seconds, first.resumed_from_checkpoint) == (160.0, True)
    assert (second.saved_at, second.lost_seconds) == (2385.0, 0.0)
    assert (second.restart_seconds, second.resumed_from_checkpoint) == (40.0, False)
    assert first.message == "Interrupted at 1620"
    assert cost.lost_seconds == 300.0 and cost.restart_seconds == 200.0
    assert (cost.checkpoints_synced, cost.checkpoint_sync_problems) == (5, 2)
    advice = cost.interval
    assert (advice.per_hour, advice.rate_from) == (2, "given")
    assert advice.checkpoint_seconds == 4.0 and advice.restart_seconds == 100.0
    assert advice.checkpoint_from == "measured"
    assert advice.interval == 272.5 and advice.best_interval == pytest.approx(120.0)
    assert advice.best_overhead == pytest.approx(4 / 120 + 160 / 1800)
    assert advice.overhead == pytest.approx(4 / 272.5 + 236.25 / 1800)
    assert advice.lost_per_interruption == 236.25 and advice.best_lost_per_interruption == 160


def test_the_lost_work_is_billed_at_the_rate_the_job_ran_at(store: MetadataStore) -> None:
    finish(store)
    shown = job_spot_cost(store, NAME, SpotPriceSettings(), now=9999.0).to_json()
    assert shown["EnableManagedSpotTraining"] is True
    assert shown["LostCostUsd"] == pytest.approx(300 / 3600 * 1.1475 * 2)  # at spot
    assert shown["SavingsPercent"] == pytest.approx((1 - 1850 / 2030) * 100, abs=0.01)
    assert shown["OnDemandCostUsd"] == 3.93125 and shown["SpotCostUsd"] == 1.179375
    assert shown["Prices"]["SpotPriceKind"] == "estimate"  # type: ignore[index]


def test_without_a_given_rate_the_advice_uses_the_rate_this_job_saw(store: MetadataStore) -> None:
    finish(store)
    advice = job_spot_cost(store, NAME, SpotPriceSettings(), now=9999.0).interval
    seen = 2 / (1850 / 3600)
    assert advice.rate_from == "this job" and advice.per_hour == pytest.approx(seen)
    assert advice.best_interval == pytest.approx(young_daly_interval(4.0, 3600 / seen))


def test_the_control_planes_billable_seconds_win_once_the_job_has_ended(
    store: MetadataStore,
) -> None:
    finish(store, billable_seconds=1800)
    cost = job_spot_cost(store, NAME, SpotPriceSettings(prices=(("ml.p3.2xlarge", 1.0),)), 0.0)
    assert cost.billable_seconds == 1800 and cost.spot_usd == pytest.approx(1.0)
    assert cost.prices.spot_kind == "yours"


def test_a_running_job_counts_what_each_attempt_has_trained_so_far(store: MetadataStore) -> None:
    record(2000.0, store)  # attempt 2 has trained since 1780
    cost = job_spot_cost(store, NAME, SpotPriceSettings(), now=2000.0)
    assert cost.running and cost.billable_seconds == pytest.approx(630 + 220)
    assert cost.training_seconds == 2000.0 - 1020.0  # since training first began
    (only,) = cost.interruptions
    assert (only.lost_seconds, only.restart_seconds, only.resumed_from_checkpoint) == (
        300.0,
        160.0,
        True,
    )


def test_an_on_demand_job_is_billed_its_whole_time_and_has_no_savings(tmp_path: Path) -> None:
    store = open_store(tmp_path / "on-demand.db", spot=False)
    try:
        record(2000.0, store)  # interrupted as a retry would be: all of it is billed
        cost = job_spot_cost(store, NAME, SpotPriceSettings(), now=2000.0)
    finally:
        store.close()
    assert not cost.use_spot and cost.billable_seconds == cost.training_seconds == 980.0
    assert cost.savings_percent is None
    assert cost.to_json()["LostCostUsd"] == pytest.approx(300 / 3600 * 3.825 * 2)  # on-demand


def test_an_interruption_waiting_for_capacity_has_no_restart_yet(store: MetadataStore) -> None:
    record(1700.0, store)  # Pending since 1650
    cost = job_spot_cost(store, NAME, SpotPriceSettings(), now=1700.0)
    (only,) = cost.interruptions
    assert only.restart_seconds is None and only.resumed_from_checkpoint is None
    assert cost.billable_seconds == 630.0  # Pending is not billed
    assert cost.interval.restart_seconds == 0.0  # no restart measured yet


def test_without_checkpoints_there_is_no_interval_to_advise(store: MetadataStore) -> None:
    store.set_secondary(NAME, "Training", "t", 1020.0)
    cost = job_spot_cost(store, NAME, SpotPriceSettings(), now=1320.0, interruptions_per_hour=1)
    assert cost.interruptions == () and cost.billable_seconds == 300.0
    advice = cost.interval
    assert advice.checkpoint_seconds is None and advice.best_interval is None
    assert advice.to_json()["BestIntervalSeconds"] is None


def test_a_given_checkpoint_time_replaces_the_measured_one(store: MetadataStore) -> None:
    finish(store)
    advice = job_spot_cost(store, NAME, SpotPriceSettings(), 0.0, 2.0, 9.0).interval
    assert (advice.checkpoint_seconds, advice.checkpoint_from) == (9.0, "given")
    assert advice.best_interval == pytest.approx(180.0)  # sqrt(2 x 9 x 1800)


def test_a_zero_write_time_measures_nothing(tmp_path: Path) -> None:
    """The sync first saw the file after it was written (a write + rename): 0 s, no measure."""
    store = open_store(tmp_path / "z.db")
    try:
        store.set_secondary(NAME, "Training", "t", 1020.0)
        store.add_checkpoint(CheckpointRecord(NAME, 1, "algo-1", "synced", 1400.0, 1, 9, 1390.0,
                                              0.0, 0.1, None))  # fmt: skip
        advice = job_spot_cost(store, NAME, SpotPriceSettings(), 1400.0, 1.0).interval
    finally:
        store.close()
    assert (advice.checkpoint_seconds, advice.checkpoint_from) == (None, "none")
    assert advice.interval is None and advice.best_interval is None


def test_files_of_one_checkpoint_count_once_in_the_interval(tmp_path: Path) -> None:
    """The sync records each file it uploads while training: a model and its optimizer state
    written 0.2 s apart are one checkpoint, so the interval is 60 s, not the median of
    60, 0.2, 60, 0.2, ...; C is the median of the files' own write times."""
    store = open_store(tmp_path / "files.db")
    try:
        store.set_secondary(NAME, "Training", "t", 1000.0)
        for at in (1060.0, 1120.0, 1180.0):
            for offset, write in ((0.0, 4.0), (0.2, 2.0)):
                store.add_checkpoint(CheckpointRecord(NAME, 1, "algo-1", "synced", at + 1, 1, 9,
                                                      at + offset, write, 0.1, None))  # fmt: skip
        advice = job_spot_cost(store, NAME, SpotPriceSettings(), 1200.0, 2.0).interval
    finally:
        store.close()
    assert advice.interval == pytest.approx(60.0)
    assert (advice.checkpoint_seconds, advice.checkpoint_from) == (3.0, "measured")


def test_an_attempt_interrupted_before_it_trained_lost_nothing(store: MetadataStore) -> None:
    record(1760.0, store)  # attempt 2 is Downloading since 1760 when the next interruption comes
    store.set_secondary(NAME, "Interrupted", "again, before training", 1770.0)
    store.set_secondary(NAME, "Pending", "waiting", 1775.0)
    first, second = job_spot_cost(store, NAME, SpotPriceSettings(), now=1800.0).interruptions
    assert first.lost_seconds == 300.0 and first.restart_seconds is None  # never trained again
    assert (second.training_since, second.saved_at, second.lost_seconds) == (None, None, 0.0)
    assert second.to_json()["TrainingSince"] is None


def test_an_unknown_job_is_refused(store: MetadataStore) -> None:
    with pytest.raises(JobNotFoundError, match="no job named 'nope'"):
        job_spot_cost(store, "nope", SpotPriceSettings(), now=0.0)


def test_describes_cost_of_a_running_spot_job_leaves_the_waits_out(store: MetadataStore) -> None:
    """``job_cost`` (describe's Cost) as the control plane bills: 630 s of attempt 1 accrued,
    attempt 2 training since 1780: at 2000, 850 s, not the 980 s since training began."""
    record(2000.0, store)
    store.update_job(NAME, 2000.0, training_start_time=1020.0, billable_accrued=630.0,
                     attempt_training_start=1780.0)  # fmt: skip
    job = store.get_job(NAME)
    assert job is not None and job_cost(job, 2000.0).seconds == pytest.approx(850.0)
