"""The metadata store's records: jobs, transitions, hosts, and exactly-once event ingestion."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainops.protocol import AgentEvent, EventKind
from trainops.spec import JobSpec
from trainops.store import HostState, JobExistsError, MetadataStore, NewHost


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(tmp_path / "trainops.db")
    yield opened
    opened.close()


def _job(store: MetadataStore, name: str = "job-a", now: float = 100.0) -> None:
    store.create_job(
        name=name,
        spec=JobSpec(entry_point="train.py").view(),
        code_uri="file:///code.tar.gz",
        output_prefix=f"file:///out/{name}",
        max_attempts=2,
        status="InProgress",
        secondary_status="Starting",
        message="Preparing the instances for training",
        now=now,
    )


def _host(store: MetadataStore, job: str = "job-a", host: str = "algo-1") -> None:
    store.create_hosts(job, 1, [NewHost(host=host, root="/r", state_dir="/s")])


def _log(seq: int, line: str | None = None) -> AgentEvent:
    return AgentEvent(
        seq, 1000.0 + seq, EventKind.LOG, {"stream": "stdout", "line": line or f"l{seq}"}
    )


def test_a_job_name_is_taken_once(store: MetadataStore) -> None:
    _job(store)
    with pytest.raises(JobExistsError, match="job-a"):
        _job(store)


def test_transitions_chain_end_to_start(store: MetadataStore) -> None:
    _job(store)
    store.set_secondary("job-a", "Downloading", "downloading", 105.0)
    job = store.set_secondary(
        "job-a", "Completed", "done", 110.0, final=True, status="Completed", training_end_time=110.0
    )
    assert (job.status, job.secondary_status, job.training_end_time) == (
        "Completed",
        "Completed",
        110.0,
    )
    assert job.last_modified_time == 110.0
    steps = [(t.status, t.start_time, t.end_time) for t in store.transitions("job-a")]
    assert steps == [
        ("Starting", 100.0, 105.0),
        ("Downloading", 105.0, 110.0),
        ("Completed", 110.0, 110.0),
    ]


def test_updates_name_only_known_fields(store: MetadataStore) -> None:
    _job(store)
    with pytest.raises(ValueError, match="not job fields"):
        store.update_job("job-a", 1.0, no_such_field=1)
    with pytest.raises(KeyError):
        store.update_job("missing", 1.0, attempt=2)


def test_ingest_stores_each_event_once(store: MetadataStore) -> None:
    _job(store)
    _host(store)
    first = store.ingest("job-a", "algo-1", 1, [_log(1), _log(2), _log(3)])
    assert first is not None and first.acked_seq == 3 and len(first.accepted) == 3
    again = store.ingest("job-a", "algo-1", 1, [_log(3), _log(2), _log(4), _log(4)])
    assert again is not None and again.acked_seq == 4
    assert [e.seq for e in again.accepted] == [4]
    assert [ln.line for ln in store.logs("job-a")] == ["l1", "l2", "l3", "l4"]


def test_ingest_stops_at_a_gap_so_the_agent_resends(store: MetadataStore) -> None:
    _job(store)
    _host(store)
    result = store.ingest("job-a", "algo-1", 1, [_log(1), _log(3)])
    assert result is not None and result.acked_seq == 1
    assert [ln.line for ln in store.logs("job-a")] == ["l1"]


def test_ingest_for_an_unknown_host_is_refused(store: MetadataStore) -> None:
    _job(store)
    assert store.ingest("job-a", "algo-9", 1, [_log(1)]) is None


def test_malformed_events_are_acknowledged_and_dropped(store: MetadataStore) -> None:
    _job(store)
    _host(store)
    events = [
        AgentEvent(1, 1.0, EventKind.METRIC, {"name": "loss", "value": "not a number"}),
        AgentEvent(2, 2.0, EventKind.METRIC, {"name": "loss", "value": float("nan")}),
        AgentEvent(3, 3.0, EventKind.METRIC, {"name": "loss", "value": 0.25, "timestamp": 3.5}),
    ]
    result = store.ingest("job-a", "algo-1", 1, events)
    assert result is not None and result.acked_seq == 3
    assert [(m.name, m.value, m.ts) for m in store.metrics("job-a")] == [("loss", 0.25, 3.5)]


def test_exit_phase_and_artifact_events_update_the_host(store: MetadataStore) -> None:
    _job(store)
    _host(store)
    events = [
        AgentEvent(1, 1.0, EventKind.PHASE, {"phase": "Training", "message": ""}),
        AgentEvent(2, 2.0, EventKind.ARTIFACT, {"name": "log", "uri": "file:///l"}),
        AgentEvent(
            3, 3.0, EventKind.EXIT, {"outcome": "Failed", "exit_code": 2, "failure_reason": "boom"}
        ),
        AgentEvent(4, 4.0, EventKind.EXIT, {"outcome": "Completed", "exit_code": 0}),
    ]
    store.ingest("job-a", "algo-1", 1, events)
    host = store.host("job-a", "algo-1", 1)
    assert host is not None
    assert (host.state, host.phase, host.outcome, host.exit_code) == (
        HostState.EXITED,
        "Training",
        "Failed",
        2,
    )
    assert (host.failure_reason, host.exit_time, host.acked_seq) == ("boom", 3.0, 4)
    assert [(a.name, a.host, a.uri) for a in store.artifacts("job-a")] == [
        ("log", "algo-1", "file:///l")
    ]


def test_final_metrics_are_the_last_point_of_each_name(store: MetadataStore) -> None:
    _job(store)
    _host(store)
    _host(store, host="algo-2")
    points = [("loss", 1.0, 10.0), ("acc", 0.5, 11.0), ("loss", 0.5, 12.0), ("acc", 0.9, 13.0)]
    for seq, (name, value, ts) in enumerate(points, 1):
        event = AgentEvent(
            seq, ts, EventKind.METRIC, {"name": name, "value": value, "timestamp": ts}
        )
        store.ingest("job-a", "algo-1", 1, [event])
    late = AgentEvent(1, 14.0, EventKind.METRIC, {"name": "loss", "value": 0.1, "timestamp": 14.0})
    store.ingest("job-a", "algo-2", 1, [late])
    final = [(m.name, m.value, m.host) for m in store.final_metrics("job-a")]
    assert final == [("acc", 0.9, "algo-1"), ("loss", 0.1, "algo-2")]
    assert [m.value for m in store.metrics("job-a", "loss")] == [1.0, 0.5, 0.1]


def test_hosts_sort_naturally_and_active_jobs_include_live_hosts(store: MetadataStore) -> None:
    _job(store)
    store.create_hosts("job-a", 1, [NewHost(f"algo-{i}", "/r", "/s") for i in (10, 2, 1)])
    assert [h.host for h in store.hosts("job-a", 1)] == ["algo-1", "algo-2", "algo-10"]
    store.update_job("job-a", 5.0, status="Failed")
    assert [j.name for j in store.active_jobs(["InProgress"])] == ["job-a"]
    for i in (1, 2, 10):
        store.update_host("job-a", f"algo-{i}", 1, state=HostState.EXITED, processes=[{"pid": 1}])
    assert store.active_jobs(["InProgress"]) == []
    assert store.hosts("job-a", 1)[0].processes == [{"pid": 1}]


def test_unplaced_jobs_are_in_submission_order(store: MetadataStore) -> None:
    for name in ("first", "second", "third"):
        _job(store, name)
    _host(store, "second")
    waiting = store.unplaced_jobs("InProgress", ["Starting", "Pending"])
    assert [j.name for j in waiting] == ["first", "third"]


def test_list_jobs_filters(store: MetadataStore) -> None:
    for i, name in enumerate(("digits-a", "digits-b", "other")):
        _job(store, name, now=100.0 + i)
    store.update_job("digits-b", 200.0, status="Failed")

    def names(**filters: Any) -> list[str]:
        return [j.name for j in store.list_jobs(**filters)]

    assert names() == ["other", "digits-b", "digits-a"]
    assert names(statuses=["Failed"]) == ["digits-b"]
    assert names(name_contains="DIGITS") == ["digits-b", "digits-a"]
    assert names(created_after=100.5, created_before=101.5) == ["digits-b"]
    assert names(limit=1) == ["other"]


def test_threads_and_a_second_connection_share_the_database(tmp_path: Path) -> None:
    first = MetadataStore(tmp_path / "shared.db")
    second = MetadataStore(tmp_path / "shared.db")
    try:
        _job(first)
        hosts = [f"algo-{i}" for i in range(1, 5)]
        first.create_hosts("job-a", 1, [NewHost(h, "/r", "/s") for h in hosts])

        def feed(store: MetadataStore, host: str) -> None:
            for seq in range(1, 51):
                store.ingest("job-a", host, 1, [_log(seq, f"{host}-{seq}")])

        threads = [
            threading.Thread(target=feed, args=(first if i % 2 else second, h))
            for i, h in enumerate(hosts)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(second.logs("job-a", limit=10_000)) == 200
        cursors = [ln.cursor for ln in first.logs("job-a", limit=10_000)]
        assert cursors == sorted(set(cursors))
    finally:
        first.close()
        second.close()
