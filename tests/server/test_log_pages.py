"""A page of GET /jobs/{name}/logs is bounded by characters, not only by its line count."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from trainops.server._views import PAGE_CHARS, log_page
from trainops.spec import JobSpec
from trainops.store import LogChunk

MIB = 1024 * 1024


def _job() -> Any:
    return SimpleNamespace(
        spec=JobSpec(entry_point="x.py").view(), status="InProgress", secondary_status="Training"
    )


def _lines(count: int, chars: int, per_chunk: int = 7) -> list[LogChunk]:
    """``count`` lines of ``chars`` characters, cursors 1.., stored ``per_chunk`` to a chunk."""
    return [
        LogChunk(first, "algo-1", 1, 0.0, "stdout", None, ["x" * chars] * n)
        for first in range(1, count + 1, per_chunk)
        for n in [min(per_chunk, count + 1 - first)]
    ]


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


def test_a_page_of_runs_has_the_lines_of_the_page_of_lines() -> None:
    chunks = [
        LogChunk(3, "algo-1", 1, 0.0, "stdout", None, ["a", "b"]),
        LogChunk(9, "algo-2", 1, 1.5, "stderr", 2, ["c"]),
    ]
    lines = log_page(chunks, 2, _job())
    runs = log_page(chunks, 2, _job(), runs=True)
    assert [(x["cursor"], x["host"], x["line"], x.get("rank")) for x in lines["lines"]] == [
        (3, "algo-1", "a", None),
        (4, "algo-1", "b", None),
        (9, "algo-2", "c", 2),
    ]
    assert runs["runs"] == [
        {
            "cursor": 3,
            "host": "algo-1",
            "stream": "stdout",
            "timestamp": lines["lines"][0]["timestamp"],
            "lines": ["a", "b"],
        },
        {
            "cursor": 9,
            "host": "algo-2",
            "stream": "stderr",
            "timestamp": lines["lines"][2]["timestamp"],
            "lines": ["c"],
            "rank": 2,
        },
    ]
    assert lines["next"] == runs["next"] == 9 and "lines" not in runs
