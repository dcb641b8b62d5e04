"""The jobs page's live refresh is cheap: an unchanged table is answered 304 from one listing
query (its fingerprint), with no describe of any row; a change (a new job) is a new table. Real
server, fake agents; the statements counted are the ones the server's store really runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.control._harness import ControlPlane
from trainops.server.ui import Page

_TABLE = "/ui/jobs/-/table"


@contextmanager
def _statements(plane: ControlPlane) -> Iterator[list[str]]:
    seen: list[str] = []
    connection = plane.server.controller.store._conn
    connection.set_trace_callback(seen.append)
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
