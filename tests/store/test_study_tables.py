"""The studies tables (schema version 16): a study is written whole, kept across a reopen, and
replaced (its rows with it) by a later write under its name."""

from __future__ import annotations

from pathlib import Path

from trainops.store import MetadataStore, StudyRowRecord


def _row(label: str, count: int, **figures: float | None) -> StudyRowRecord:
    return StudyRowRecord(label=label, instance_type="ml.m5.large", instance_count=count,
                          processes_per_host=1, job_name=f"job-{count}", status="Completed",
                          **figures)  # fmt: skip


def test_a_study_is_replaced_whole_and_kept_across_a_reopen(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "s.db")
    first = store.put_study("s1", title="t", status="InProgress", target_metric=None,
                            rows=[_row("one", 1), _row("two", 2)], now=10.0)  # fmt: skip
    assert [r.label for r in first.rows] == ["one", "two"]
    rows = [_row("two", 2, throughput=200.0, efficiency=1.0)]
    store.put_study("s1", title="t2", status="Completed", target_metric="acc", rows=rows, now=20.0)
    store.put_study("s0", title="older", status="Failed", target_metric=None, rows=[], now=5.0)
    store.close()
    reopened = MetadataStore(tmp_path / "s.db")
    try:
        found = reopened.get_study("s1")
        assert found is not None
        assert (found.title, found.status, found.target_metric) == ("t2", "Completed", "acc")
        assert (found.creation_time, found.last_modified_time) == (10.0, 20.0)
        assert found.rows == (rows[0],)
        assert reopened.get_study("missing") is None
        assert [s.name for s in reopened.list_studies()] == ["s1", "s0"]  # newest first
        assert [s.name for s in reopened.list_studies(limit=1)] == ["s1"]
    finally:
        reopened.close()
