"""The store's job listing in each order (``JOB_ORDERS``), both directions: ties broken by
submission order, keyset pages that walk every job once in the listing's own order, and each
order read from an index (no sort of the whole table), with a status filter too: one status
reads its own index in that order (migration 0018), several merge a page of each."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainops.spec import JobSpec
from trainops.store import JOB_ORDERS, JobRecord, MetadataStore

_STATUSES = ("InProgress", "Completed", "Failed")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(tmp_path / "trainops.db")
    for i in range(23):  # names out of creation order; ties in creation time and in status
        name = f"job-{(i * 7) % 23:02d}"
        opened.create_job(name=name, spec=JobSpec(entry_point="t.py").view(),
                          code_uri="file:///c.tar.gz", output_prefix=f"file:///o/{name}",
                          max_attempts=1, status=_STATUSES[i % 3], secondary_status="Starting",
                          message="m", now=100.0 + i // 2)  # fmt: skip
    yield opened
    opened.close()


def _key(order: str, job: JobRecord) -> tuple[str | float, int]:
    return ({"created": job.creation_time, "name": job.name, "status": job.status}[order],
            job.order)  # fmt: skip


@pytest.mark.parametrize("order", list(JOB_ORDERS))
@pytest.mark.parametrize("descending", [True, False])
def test_each_order_sorts_and_its_keyset_pages_walk_every_job_once(
    store: MetadataStore, order: str, descending: bool
) -> None:
    whole = store.list_jobs(order=order, descending=descending, limit=100)
    assert len(whole) == 23
    assert [_key(order, j) for j in whole] == sorted(
        (_key(order, j) for j in whole), reverse=descending
    )
    walked: list[str] = []
    after = None
    while True:
        page = store.list_jobs(order=order, descending=descending, limit=4, after=after)
        walked += [j.name for j in page]
        if len(page) < 4:
            break
        after = _key(order, page[-1])
    assert walked == [j.name for j in whole]
    failed = store.list_jobs(statuses=["Failed"], order=order, descending=descending, limit=100)
    assert [j.name for j in failed] == [j.name for j in whole if j.status == "Failed"]


def test_an_unknown_order_is_refused(store: MetadataStore) -> None:
    with pytest.raises(ValueError, match="order 'cost' is not one of created, name, status"):
        store.list_jobs(order="cost")


@pytest.mark.parametrize("order", list(JOB_ORDERS))
def test_each_order_is_read_from_an_index(store: MetadataStore, tmp_path: Path, order: str) -> None:
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)  # the statement the store really runs
    try:
        store.list_jobs(order=order, limit=5, after=("job-05" if order != "created" else 105.0, 9))
    finally:
        store._conn.set_trace_callback(None)
    statement = next(s for s in seen if s.startswith("SELECT * FROM jobs"))
    with sqlite3.connect(tmp_path / "trainops.db") as other:
        plan = " | ".join(row[3] for row in other.execute(f"EXPLAIN QUERY PLAN {statement}"))
    other.close()
    assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan


_FILTERS = [["Failed"], ["Failed", "InProgress"], ["Completed", "Failed", "Completed"]]


@pytest.mark.parametrize("order", list(JOB_ORDERS))
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("statuses", _FILTERS)
def test_a_status_filter_keeps_each_order_and_its_keyset_pages(
    store: MetadataStore, order: str, descending: bool, statuses: list[str]
) -> None:
    whole = store.list_jobs(order=order, descending=descending, limit=100)
    wanted = [j.name for j in whole if j.status in statuses]
    walked: list[str] = []
    after = None
    while True:
        page = store.list_jobs(
            statuses=statuses, order=order, descending=descending, limit=3, after=after
        )
        walked += [j.name for j in page]
        if len(page) < 3:
            break
        after = _key(order, page[-1])
    assert walked == wanted


def _plan(store: MetadataStore, path: Path, **listing: object) -> str:
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)  # the statement the store really runs
    try:
        store.list_jobs(limit=5, **listing)  # type: ignore[arg-type]
    finally:
        store._conn.set_trace_callback(None)
    statement = next(s for s in seen if s.startswith("SELECT * FROM"))
    with sqlite3.connect(path) as other:
        plan = " | ".join(row[3] for row in other.execute(f"EXPLAIN QUERY PLAN {statement}"))
    other.close()
    return plan


_AFTER = {"created": 105.0, "name": "job-05", "status": "Failed"}


@pytest.mark.parametrize("order", list(JOB_ORDERS))
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("paged", [False, True])
def test_one_status_in_each_order_reads_its_index_and_sorts_nothing(
    store: MetadataStore, tmp_path: Path, order: str, descending: bool, paged: bool
) -> None:
    after = (_AFTER[order], 9) if paged else None
    plan = _plan(store, tmp_path / "trainops.db", statuses=["Failed"], order=order,
                 descending=descending, after=after)  # fmt: skip
    index = {"created": "jobs_by_status_creation", "name": "jobs_by_status_name"}
    assert f"USING INDEX {index.get(order, 'jobs_by_status')} (status=?" in plan, plan
    assert "TEMP B-TREE" not in plan and "SCAN jobs" not in plan, plan


@pytest.mark.parametrize("order", list(JOB_ORDERS))
def test_several_statuses_merge_a_page_of_each_read_from_its_index(
    store: MetadataStore, tmp_path: Path, order: str
) -> None:
    plan = _plan(store, tmp_path / "trainops.db", statuses=["Failed", "Completed"], order=order)
    assert plan.count("SEARCH jobs USING INDEX") == 2, plan
    assert "SCAN jobs" not in plan, plan
