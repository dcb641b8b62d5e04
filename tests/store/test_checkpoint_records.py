"""Checkpoint records (schema version 13): an agent's ``checkpoint`` events are stored once each
and read back as written; a malformed one is dropped without holding back the events after it;
a saved version-11 database upgrades to hold them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store._running import store_with_running_job
from trainops.protocol import AgentEvent, EventKind
from trainops.store import CheckpointRecord, MetadataStore

V11_FIXTURE = Path(__file__).parent / "assets" / "trainops-v11.db"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = store_with_running_job(tmp_path / "trainops.db", 2, "algo-2")
    yield opened
    opened.close()


def _record(**fields: object) -> CheckpointRecord:
    defaults: dict[str, object] = {
        "job": "job-a",
        "attempt": 2,
        "host": "algo-2",
        "kind": "synced",
        "at": 1000.0,
        "files": 3,
        "bytes": 4096,
        "newest_write": 990.5,
        "write_seconds": 0.25,
        "upload_seconds": 1.5,
        "reason": None,
    }
    return CheckpointRecord(**(defaults | fields))  # type: ignore[arg-type]


def test_an_agents_checkpoint_event_is_stored_once_as_a_record(store: MetadataStore) -> None:
    wanted = _record(kind="sync_incomplete", reason="model.pt was still being written")
    event = AgentEvent(1, 1001.0, EventKind.CHECKPOINT, wanted.event_data())
    first = store.ingest("job-a", "algo-2", 2, [event])
    again = store.ingest("job-a", "algo-2", 2, [event])  # a resend after a lost reply
    assert first is not None and again is not None and again.accepted == []
    assert store.checkpoints("job-a") == [wanted]
    assert store.checkpoints("other-job") == []


def test_records_read_back_oldest_first(store: MetadataStore) -> None:
    restored = _record(kind="restored", at=500.0, reason="newest file 12 s old")
    synced = _record(at=900.0, newest_write=None, write_seconds=None, upload_seconds=None)
    store.add_checkpoint(synced)
    store.add_checkpoint(restored)
    assert store.checkpoints("job-a") == [restored, synced]


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "exploded", "files": 1, "bytes": 1},
        {"kind": "synced", "files": -1, "bytes": 1},
        {"kind": "synced", "files": True, "bytes": 1},
        {"kind": "synced", "files": 1, "bytes": "lots"},
        {"kind": "synced", "files": 1, "bytes": 1, "write_seconds": float("nan")},
        {"kind": "synced", "files": 1, "bytes": 1, "upload_seconds": -3},
    ],
)
def test_a_malformed_checkpoint_event_is_dropped_and_later_events_still_land(
    store: MetadataStore, data: dict[str, object]
) -> None:
    bad = AgentEvent(1, 1001.0, EventKind.CHECKPOINT, data)
    good = AgentEvent(2, 1002.0, EventKind.CHECKPOINT, _record().event_data())
    result = store.ingest("job-a", "algo-2", 2, [bad, good])
    assert result is not None and result.acked_seq == 2
    assert store.checkpoints("job-a") == [_record()]


def test_a_long_reason_is_cut_and_a_missing_time_is_the_events(store: MetadataStore) -> None:
    data = {"kind": "sync_failed", "files": 0, "bytes": 0, "reason": "x" * 10_000}
    store.ingest("job-a", "algo-2", 2, [AgentEvent(1, 1234.0, EventKind.CHECKPOINT, data)])
    (record,) = store.checkpoints("job-a")
    assert record.at == 1234.0
    assert record.reason is not None and 100 < len(record.reason) < 10_000


def test_a_version_11_database_upgrades_to_hold_checkpoint_records(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(V11_FIXTURE, path)
    store = MetadataStore(path)
    try:
        assert store.schema_version >= 13
        store.add_checkpoint(_record(job="running-job"))
        assert [r.job for r in store.checkpoints("running-job")] == ["running-job"]
    finally:
        store.close()
