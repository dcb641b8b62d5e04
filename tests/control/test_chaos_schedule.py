"""The chaos schedule is a pure function of the seed: the same seed, the same interruptions."""

from __future__ import annotations

import statistics

import pytest

from trainops._errors import SpecError
from trainops.control.services import chaos_schedule
from trainops.spec import ChaosSpec, JobSpec


def plan(**fields: object) -> JobSpec:
    stopping = {"max_runtime_in_seconds": 60, "max_wait_time_in_seconds": 120}
    return JobSpec(
        entry_point="t.py",
        instance_count=4,
        use_spot_instances=True,
        stopping_condition=stopping,
        chaos=fields,
    )


def test_the_same_seed_gives_the_same_schedule() -> None:
    first = plan(seed=5, interruptions=20, capacity_gap_seconds=[1, 9]).view()
    again = plan(seed=5, interruptions=20, capacity_gap_seconds=[1, 9]).view()
    other = plan(seed=6, interruptions=20, capacity_gap_seconds=[1, 9]).view()
    assert first.chaos is not None and other.chaos is not None and again.chaos is not None
    schedule = chaos_schedule(first.chaos, 4)
    assert schedule == chaos_schedule(again.chaos, 4)
    assert schedule != chaos_schedule(other.chaos, 4)
    # A longer schedule starts with the shorter one (each event depends on its index only).
    longer = plan(seed=5, interruptions=30, capacity_gap_seconds=[1, 9]).view().chaos
    assert longer is not None and chaos_schedule(longer, 4)[:20] == schedule
    assert all(1 <= e.capacity_gap_seconds <= 9 and len(e.hosts) == 1 for e in schedule)
    assert {h for e in schedule for h in e.hosts} <= {"algo-1", "algo-2", "algo-3", "algo-4"}


def test_gaps_between_interruptions_have_the_mean_asked_for() -> None:
    view = plan(seed=1, interruptions=1000, mean_seconds_between=30).view()
    assert view.chaos is not None
    gaps = [e.after_seconds for e in chaos_schedule(view.chaos, 2)]
    assert 27 < statistics.mean(gaps) < 33 and min(gaps) >= 0


def test_all_hosts_and_a_single_gap() -> None:
    view = plan(hosts="all", capacity_gap_seconds=7).view()
    assert view.chaos is not None
    [event] = chaos_schedule(view.chaos, 4)
    assert event.hosts == ("algo-1", "algo-2", "algo-3", "algo-4")
    assert event.capacity_gap_seconds == 7


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"capacity_gap_seconds": [5, 1]}, "chaos.capacity_gap_seconds", "0 <= min <= max"),
        ({"capacity_gap_seconds": [-1, 1]}, "chaos.capacity_gap_seconds", "0 <= min <= max"),
        ({"capacity_gap_seconds": [0, 1e12]}, "chaos.capacity_gap_seconds", "a week"),
        ({"mean_seconds_between": 0}, "chaos.mean_seconds_between", "greater than 0"),
        ({"notice_seconds": float("inf")}, "chaos.notice_seconds", ""),
        ({"interruptions": 10**9}, "chaos.interruptions", "1000"),
        ({"hosts": "some"}, "chaos.hosts", "'one' or 'all'"),
        ({"seed": -1}, "chaos.seed", "greater than or equal to 0"),
    ],
)
def test_bad_chaos_is_refused_naming_the_field(
    fields: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(SpecError) as caught:
        plan(**fields)
    [(path, reason)] = caught.value.problems
    assert path == field and words in reason


def test_chaos_spec_defaults_are_the_seams() -> None:
    chaos = ChaosSpec()
    assert (chaos.seed, chaos.interruptions, chaos.mean_seconds_between) == (0, 1, 60.0)
    assert (chaos.capacity_gap_seconds, chaos.notice_seconds, chaos.hosts) == ((0, 0), 120, "one")
