"""A job's log read as streams in time order, a page at a time, forward and backward: every line
once, lines written out of time order put in order, time windows, and the streams' figures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store._running import store_with_running_job
from trainops.protocol import AgentEvent, EventKind
from trainops.store import LogPosition, MetadataStore, NewHost, StreamLine

KEY = ("job-a", "algo-1", 1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = store_with_running_job(tmp_path / "trainops.db")
    opened.create_hosts("job-a", 1, [NewHost(host="algo-2", root="/r2", state_dir="/s2")])
    yield opened
    opened.close()


def _log(seq: int, ts: float, lines: list[str]) -> AgentEvent:
    return AgentEvent(seq, ts, EventKind.LOG, {"stream": "stdout", "lines": lines})


def _all(store: MetadataStore, *, backward: bool, size: int) -> list[StreamLine]:
    position = LogPosition.tail() if backward else LogPosition.head()
    read: list[StreamLine] = []
    while page := store.stream_lines([KEY], position, backward=backward, max_lines=size):
        read += page
        position = LogPosition(page[-1].ts, page[-1].cursor)
    return read


def test_a_long_log_pages_to_its_end_each_line_once_in_either_direction(
    store: MetadataStore,
) -> None:
    events = [_log(1 + 100 * i, 1000.0 + i, [f"{i}:{j}" for j in range(100)]) for i in range(200)]
    assert store.ingest("job-a", "algo-1", 1, events) is not None
    assert store.ingest("job-a", "algo-2", 1, [_log(1, 1000.5, ["other host"])]) is not None
    forward = [line.line for line in _all(store, backward=False, size=777)]
    assert forward == [f"{i}:{j}" for i in range(200) for j in range(100)]
    backward = [line.line for line in _all(store, backward=True, size=333)]
    assert backward == forward[::-1]


def test_lines_are_in_time_order_whatever_order_they_came_in(store: MetadataStore) -> None:
    events = [_log(1, 1003.0, ["late"]), _log(2, 1001.0, ["early", "early too"])]
    assert store.ingest("job-a", "algo-1", 1, events) is not None
    assert [x.line for x in _all(store, backward=False, size=1)] == ["early", "early too", "late"]
    assert [x.line for x in _all(store, backward=True, size=2)] == ["late", "early too", "early"]


def test_a_window_of_milliseconds_and_a_page_of_characters(store: MetadataStore) -> None:
    events = [_log(i + 1, 1000.0 + i / 1000, [f"at {i}", "x" * 600]) for i in range(0, 10, 2)]
    assert store.ingest("job-a", "algo-1", 1, events) is not None
    head = LogPosition.head()
    windowed = store.stream_lines([KEY], head, window_ms=(1_000_002, 1_000_006))
    assert [x.line for x in windowed if x.line.startswith("at")] == ["at 2", "at 4"]
    page = store.stream_lines([KEY], head, max_chars=1000)
    assert [x.line[:4] for x in page] == ["at 0", "x" * 4, "at 2"]  # the next would pass 1,000
    one = store.stream_lines([KEY], head, max_chars=1)
    assert len(one) == 1  # always at least one line


def test_streams_say_when_they_began_and_ended(store: MetadataStore) -> None:
    events = [_log(1, 1005.0, ["a", "b"]), _log(3, 1002.0, ["c"])]
    assert store.ingest("job-a", "algo-1", 1, events) is not None
    (stream,) = store.log_streams(["job-a"])
    assert (stream.host, stream.attempt, stream.lines) == ("algo-1", 1, 3)
    assert (stream.first_ts, stream.last_ts) == (1005.0, 1005.0)  # the first stored line's time
    assert store.log_streams(["job-b"]) == []
    assert [s.job for s in store.log_streams()] == ["job-a"]
