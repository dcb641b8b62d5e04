"""A page of GET /jobs/{name}/logs is bounded by characters, not only by its line count."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from trainops.server._views import PAGE_CHARS, log_page
from trainops.spec import JobSpec
from trainops.store import LogLine

MIB = 1024 * 1024


def _job() -> Any:
    return SimpleNamespace(
        spec=JobSpec(entry_point="x.py").view(), status="InProgress", secondary_status="Training"
    )


def _lines(count: int, chars: int) -> list[LogLine]:
    return [LogLine(i + 1, "algo-1", 1, 0.0, "stdout", "x" * chars) for i in range(count)]


def test_many_long_lines_are_split_over_pages_with_next_where_the_page_stopped() -> None:
    page = log_page(_lines(100, MIB), 0, _job())
    shown = page["lines"]
    assert len(shown) == PAGE_CHARS // MIB
    assert sum(len(line["line"]) for line in shown) <= PAGE_CHARS
    assert page["next"] == shown[-1]["cursor"]


def test_a_single_line_over_the_page_size_still_comes_alone() -> None:
    page = log_page(_lines(3, PAGE_CHARS + 1), 0, _job())
    assert [line["cursor"] for line in page["lines"]] == [1]
    assert page["next"] == 1


def test_short_lines_are_not_cut() -> None:
    page = log_page(_lines(1000, 80), 5, _job())
    assert len(page["lines"]) == 1000
    assert page["next"] == 1000
