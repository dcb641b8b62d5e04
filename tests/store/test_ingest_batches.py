"""Ingesting batched events (one sequence number per line or value), long and binary lines."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store._running import store_with_running_job
from tests.store.test_store_records import _host, _job
from trainops.protocol import AgentEvent, EventKind
from trainops.store import MetadataStore, NewHost
from trainops.store._ingest import CHUNK_LINES, MAX_LINE_CHARS


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = store_with_running_job(tmp_path / "trainops.db")
    yield opened
    opened.close()


def _lines(seq: int, lines: list[str]) -> AgentEvent:
    return AgentEvent(seq, 1000.0 + seq, EventKind.LOG, {"stream": "stdout", "lines": lines})


def _values(seq: int, values: list[object]) -> AgentEvent:
    data = {"name": "loss", "timestamp": 5.0, "values": values}
    return AgentEvent(seq, 1000.0 + seq, EventKind.METRIC, data)


def test_a_batch_spans_one_sequence_number_per_line_and_is_stored_once(
    store: MetadataStore,
) -> None:
    first = store.ingest("job-a", "algo-1", 1, [_lines(1, ["a", "b", "c"]), _lines(4, ["d"])])
    assert first is not None and first.acked_seq == 4
    again = store.ingest("job-a", "algo-1", 1, [_lines(1, ["a", "b", "c"]), _lines(5, ["e", "f"])])
    assert again is not None and again.acked_seq == 6
    assert [e.seq for e in again.accepted] == [5]
    gap = store.ingest("job-a", "algo-1", 1, [_lines(8, ["h"])])
    assert gap is not None and gap.acked_seq == 6 and gap.accepted == []
    assert [ln.line for ln in store.logs("job-a")] == ["a", "b", "c", "d", "e", "f"]


def test_batched_metric_values_drop_only_their_bad_values(store: MetadataStore) -> None:
    result = store.ingest(
        "job-a", "algo-1", 1, [_values(1, [0.5, "x", float("nan"), 2]), _values(5, [1.5])]
    )
    assert result is not None and result.acked_seq == 5
    assert [(m.name, m.value, m.ts) for m in store.metrics("job-a")] == [
        ("loss", 0.5, 5.0),
        ("loss", 2.0, 5.0),
        ("loss", 1.5, 5.0),
    ]


def test_long_lines_are_cut_with_a_marker_and_binary_survives(store: MetadataStore) -> None:
    agent_cut = "z" * MAX_LINE_CHARS + "… [trainops: line cut at 1048576 of 9999999 characters]"
    lines = ["x" * (3 * MAX_LINE_CHARS), agent_cut, "nul \x00 and \ufffd", ""]
    store.ingest("job-a", "algo-1", 1, [_lines(1, lines)])
    stored = [ln.line for ln in store.logs("job-a")]
    assert stored[0] == "x" * MAX_LINE_CHARS + (
        f"… [trainops: line cut at {MAX_LINE_CHARS} of {3 * MAX_LINE_CHARS} characters]"
    )
    assert stored[1:] == lines[1:]


def test_large_batches_keep_their_order_whichever_way_they_are_inserted(
    store: MetadataStore,
) -> None:
    plain = [f"plain {i}" for i in range(20)]
    with_nul = [f"nul {i} \x00 kept" for i in range(20)]  # SQLite's JSON would cut at the NUL
    surrogate = ["lone \udc80 surrogate", *plain]
    events = [
        _lines(1, ["single"]),
        _lines(2, plain),
        _lines(22, with_nul),
        _lines(42, surrogate),
        _lines(63, ["x" * (2 * MAX_LINE_CHARS), *plain]),
    ]
    result = store.ingest("job-a", "algo-1", 1, events)
    assert result is not None and result.acked_seq == 83
    stored = store.logs("job-a", limit=1000)
    assert [ln.line for ln in stored[:62]] == [
        "single",
        *plain,
        *with_nul,
        "lone \ufffd surrogate",
        *plain,
    ]
    assert stored[62].line.endswith(
        f"line cut at {MAX_LINE_CHARS} of {2 * MAX_LINE_CHARS} characters]"
    )
    assert [ln.line for ln in stored[63:]] == plain
    assert [ln.ts for ln in stored[1:21]] == [1002.0] * 20


def test_large_metric_batches_are_stored_whole_or_value_by_value(store: MetadataStore) -> None:
    clean = [float(i) for i in range(20)]
    dirty = [*clean, float("inf"), True]
    store.ingest("job-a", "algo-1", 1, [_values(1, clean), _values(21, dirty)])
    assert [m.value for m in store.metrics("job-a")] == [*clean, *clean, 1.0]


def test_version_2_keeps_old_cursors_and_never_hands_one_out_again(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).parent / "assets" / "trainops-v1.db", path)
    with sqlite3.connect(path) as conn:  # as if later lines had been deleted with their job
        conn.execute("UPDATE sqlite_sequence SET seq = 40 WHERE name = 'logs'")
    store = MetadataStore(path)
    try:
        old = store.logs("old-job")
        assert [(ln.cursor, ln.line) for ln in old] == [(1, "old line 1"), (2, "old line 2")]
        store.create_hosts("old-job", 2, [NewHost(host="algo-1", root="/r", state_dir="/s")])
        store.ingest("old-job", "algo-1", 2, [_lines(1, ["new"] * 20)])
        cursors = [ln.cursor for ln in store.logs("old-job", after=2)]
        assert cursors == list(range(41, 61))
    finally:
        store.close()


def test_the_rank_of_a_line_is_kept_row_by_row_and_in_bulk(store: MetadataStore) -> None:
    few = AgentEvent(1, 1001.0, EventKind.LOG, {"stream": "stdout", "lines": ["a"], "rank": 3})
    many = [f"b{i}" for i in range(40)]  # enough for the json_each path
    bulk = AgentEvent(2, 1002.0, EventKind.LOG, {"stream": "stderr", "lines": many, "rank": 2})
    plain = AgentEvent(42, 1003.0, EventKind.LOG, {"stream": "stdout", "lines": ["c"]})
    bad = AgentEvent(43, 1004.0, EventKind.LOG, {"stream": "stdout", "lines": ["d"], "rank": "x"})
    store.ingest("job-a", "algo-1", 1, [few, bulk, plain, bad])
    ranks = [(ln.line, ln.rank) for ln in store.logs("job-a")]
    assert ranks == [("a", 3), *((line, 2) for line in many), ("c", None), ("d", None)]


def test_foreign_keys_are_enforced_again_after_an_ingest(store: MetadataStore) -> None:
    # The ingest skips the per-row check of the job's key (its host row proves the job exists).
    store.ingest("job-a", "algo-1", 1, [_lines(1, ["a" * 20] * 40), _values(41, [1.0] * 40)])
    with pytest.raises(sqlite3.IntegrityError):
        store.create_hosts("no-such-job", 1, [NewHost(host="algo-1", root="/r", state_dir="/s")])
    assert len(store.logs("job-a")) == 40 and len(store.metrics("job-a")) == 40


def test_pages_start_and_end_inside_chunks_with_every_cursor_once(store: MetadataStore) -> None:
    lines = [f"line {i}" for i in range(CHUNK_LINES * 2 + 10)]  # one event, three chunks
    store.ingest("job-a", "algo-1", 1, [_lines(1, lines)])
    seen: list[tuple[int, str]] = []
    after = 0
    while page := store.logs("job-a", after=after, limit=777):
        seen += [(ln.cursor, ln.line) for ln in page]
        after = page[-1].cursor
    assert [line for _cursor, line in seen] == lines
    cursors = [cursor for cursor, _line in seen]
    assert cursors == list(range(cursors[0], cursors[0] + len(lines)))
    middle = store.log_chunks("job-a", after=cursors[100], limit=5)
    assert [(c.first, c.lines) for c in middle] == [(cursors[101], lines[101:106])]


def test_a_line_holding_a_newline_stays_one_line(store: MetadataStore) -> None:
    lines = ["a", "b\nc", "d", "e\r\n"]
    store.ingest("job-a", "algo-1", 1, [_lines(1, lines)])
    assert [ln.line for ln in store.logs("job-a")] == lines


def test_lines_of_another_host_are_left_out_of_its_pages(store: MetadataStore) -> None:
    store.create_hosts("job-a", 1, [NewHost(host="algo-2", root="/r2", state_dir="/s2")])
    for i in range(3):
        store.ingest(
            "job-a", "algo-1", 1, [_lines(1 + i * 40, [f"one {i}.{n}" for n in range(40)])]
        )
        store.ingest(
            "job-a", "algo-2", 1, [_lines(1 + i * 40, [f"two {i}.{n}" for n in range(40)])]
        )
    two = store.logs("job-a", host="algo-2", limit=1000)
    assert [ln.line for ln in two] == [f"two {i}.{n}" for i in range(3) for n in range(40)]
    assert len(store.logs("job-a", limit=1000)) == 240


def test_cursors_never_go_back_past_a_deleted_job(store: MetadataStore) -> None:
    store.ingest("job-a", "algo-1", 1, [_lines(1, ["a", "b", "c"])])
    last = store.logs("job-a")[-1].cursor
    _job(store, "job-b")
    _host(store, "job-b")
    store.ingest("job-b", "algo-1", 1, [_lines(1, ["x"] * 50)])
    with sqlite3.connect(store.path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM jobs WHERE name = 'job-b'")
    _job(store, "job-c")
    _host(store, "job-c")
    store.ingest("job-c", "algo-1", 1, [_lines(1, ["y"])])
    assert store.logs("job-c")[0].cursor == last + 51


def test_many_values_are_kept_in_order_and_the_last_is_the_final_one(
    store: MetadataStore,
) -> None:
    values = [i / 7 for i in range(5000)]
    store.ingest("job-a", "algo-1", 1, [_values(1, values), _values(5001, [1e308, 1e308])])
    assert [m.value for m in store.metrics("job-a")] == [
        *values,
        1e308,
        1e308,
    ]  # their sum overflows: each is still finite
    assert [(m.name, m.value) for m in store.final_metrics("job-a")] == [("loss", 1e308)]
