"""The jobs page's live refresh is cheap: an unchanged table is answered 304 from one listing
query (its fingerprint), with no describe of any row; a change (a new job) is a new table, read
in two queries whatever the number of rows (the listing, then every row's final metrics at
once), with the same cost and metrics describe gives. Real server, fake agents; the statements
counted are the ones the server's store really runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.control._harness import ControlPlane
from trainops.server.ui import Page

_TABLE = "/ui/jobs/-/table"


# The control plane's own loops share the store's connection; what they run while a page is
# read (a monitor tick's sweep of live hosts) is not the page's cost.
_BACKGROUND = ("trainops-scheduler", "trainops-monitor", "trainops-service-", "trainops-log-feed")


@contextmanager
def _statements(plane: ControlPlane) -> Iterator[list[str]]:
    """The statements the store runs for requests, not for the control plane's own loops."""
    seen: list[str] = []

    def record(statement: str) -> None:
        if not threading.current_thread().name.startswith(_BACKGROUND):
            seen.append(statement)

    connection = plane.server.controller.store._conn
    connection.set_trace_callback(record)
    try:
        yield seen
    finally:
        connection.set_trace_callback(None)


def test_an_unchanged_table_is_a_304_without_describing_its_rows(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    for name in ("first", "second"):
        plane.submit(name, {"FAKE_LINES": "1"})
        plane.wait_ended(name)
    shown = browser_session.get(_TABLE)
    assert shown.status_code == 200 and 'data-job="second"' in shown.text
    tag = shown.headers["etag"]
    with _statements(plane) as seen:
        again = browser_session.get(_TABLE, headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.content == b""
    listings = [s for s in seen if s.startswith("SELECT * FROM jobs WHERE")]
    assert len(listings) == 1, seen  # the page's rows: one indexed listing
    assert not [s for s in seen if "FROM artifacts" in s or "final" in s.lower()], seen
    plane.submit("third", {"FAKE_LINES": "1"})
    plane.wait_ended("third")
    changed = browser_session.get(_TABLE, headers={"If-None-Match": tag})
    assert changed.status_code == 200 and 'data-job="third"' in changed.text
    assert changed.headers["etag"] != tag


def test_a_tag_of_no_part_is_refused() -> None:
    with pytest.raises(ValueError, match="a tag of no part"):
        Page(path="/ui/x", title="X", render=str, tags={"table": str})


def test_a_table_reads_its_rows_in_one_batch_not_a_describe_each(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    names = [f"batch-{i}" for i in range(4)]
    for name in names:
        plane.submit(name, {"FAKE_LINES": "2"})
    for name in names:
        plane.wait_ended(name)
    with _statements(plane) as seen:
        shown = browser_session.get(_TABLE)
    assert shown.status_code == 200 and all(f'data-job="{n}"' in shown.text for n in names)
    listings = [s for s in seen if s.startswith("SELECT * FROM jobs WHERE")]
    assert len(listings) == 2, seen  # the fingerprint's (its ETag) and the table's
    assert len([s for s in seen if "metric_chunks" in s]) == 1, seen  # all rows' metrics at once
    for table in ("transitions", "hosts", "artifacts", "rule_evaluations"):
        assert not [s for s in seen if f"FROM {table}" in s], seen
    assert "loss = 0.5" in shown.text and "step = 1" in shown.text


def test_the_listings_cost_and_metrics_are_describes(plane: ControlPlane) -> None:
    plane.submit("listed", {"FAKE_LINES": "3"}, instance_count=2)
    plane.wait_ended("listed")
    plane.submit("bare", {"FAKE_LINES": "0"})
    plane.wait_ended("bare")
    query = [("include", "Cost"), ("include", "FinalMetricDataList"), ("include", "Hosts")]
    listed = {
        j["TrainingJobName"]: j
        for j in plane.client.get("/api/v1/jobs", params=query).json()["jobs"]
    }
    for name in ("listed", "bare"):
        described = plane.describe(name)
        for key in ("Cost", "FinalMetricDataList", "Hosts"):
            assert listed[name][key] == described[key], key
    assert [m["MetricName"] for m in listed["listed"]["FinalMetricDataList"]] == ["loss", "step"]
    assert listed["bare"]["FinalMetricDataList"] == []
    assert [h["Host"] for h in listed["listed"]["Hosts"]] == ["algo-1", "algo-2"]
    plain = plane.client.get("/api/v1/jobs").json()["jobs"]
    assert not [j for j in plain if {"Cost", "FinalMetricDataList", "Hosts"} & set(j)]
    refused = plane.client.get("/api/v1/jobs", params={"include": "Environment"})
    assert refused.status_code == 400 and "query.include" in refused.json()["detail"]["message"]
