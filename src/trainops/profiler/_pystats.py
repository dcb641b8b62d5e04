"""The Python profiler's window output: ``python_stats.prof``, ``.json`` and ``.html``.

cProfile's timer follows ``cprofile_timer`` (SageMaker's ``cProfileTimer``):

- ``total_time`` and ``default``: wall-clock time (``time.perf_counter``);
- ``cpu_time``: CPU time of the profiled (main) thread (``time.thread_time``);
- ``off_cpu_time``: cProfile takes one timer, so it cannot record wall and CPU time side by
  side; it is given the clock ``perf_counter() - thread_time()``, which advances only while the
  thread is off the CPU (waiting on I/O, a lock, a sleep, the GPU), so each function's time is
  its time spent off the CPU. The clock never runs backwards for one thread.

The JSON holds the window (steps, Unix start and end, profiler, timer) and the top functions by
cumulative time, each with ``calls``, ``primitive_calls``, ``total_time`` (in the function
itself) and ``cumulative_time`` (with what it called), in seconds of that timer.
"""

from __future__ import annotations

import html
import io
import json
import marshal
import pstats
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.profiler._files import write_atomic

__all__ = ["TIMERS", "off_cpu_clock", "top_functions", "write_python_stats"]

TOP = 100


def off_cpu_clock() -> Callable[[], float]:
    """A clock of the calling thread's time off the CPU (wall minus the thread's CPU time),
    kept from stepping back by the two reads' own cost."""
    last = 0.0

    def clock() -> float:
        nonlocal last
        last = max(last, time.perf_counter() - time.thread_time())
        return last

    return clock


TIMERS: dict[str, Callable[[], Callable[[], float]] | None] = {
    "total_time": lambda: time.perf_counter,
    "default": None,
    "cpu_time": lambda: time.thread_time,
    "off_cpu_time": off_cpu_clock,
}


def top_functions(stats: pstats.Stats, limit: int = TOP) -> list[dict[str, Any]]:
    """The ``limit`` functions with the most cumulative time, most first."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (primitive, calls, total, cumulative, _callers) in table.items():
        rows.append(
            {
                "function": name,
                "file": filename,
                "line": line,
                "calls": calls,
                "primitive_calls": primitive,
                "total_time": total,
                "cumulative_time": cumulative,
            }
        )
    rows.sort(key=lambda row: (-row["cumulative_time"], row["function"]))
    return rows[:limit]


def write_python_stats(directory: Path, stats: pstats.Stats, window: dict[str, Any]) -> list[Path]:
    """Write the three files of one window into ``directory``; returns their paths."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    functions = top_functions(stats)
    document = {**window, "functions": functions}
    return [
        write_atomic(directory / "python_stats.prof", marshal.dumps(table)),
        write_atomic(directory / "python_stats.json", json.dumps(document, indent=1).encode()),
        write_atomic(directory / "python_stats.html", render_html(document).encode()),
    ]


def _rows(functions: list[dict[str, Any]], key: str, limit: int = 30) -> str:
    ordered = sorted(functions, key=lambda row: -row[key])[:limit]
    out = io.StringIO()
    for row in ordered:
        where = f"{row['file']}:{row['line']}"
        out.write(
            f"<tr><td>{html.escape(row['function'])}</td><td class=w>{html.escape(where)}</td>"
            f"<td>{row['calls']}</td><td>{row['total_time']:.6f}</td>"
            f"<td>{row['cumulative_time']:.6f}</td></tr>\n"
        )
    return out.getvalue()


def render_html(document: dict[str, Any]) -> str:
    """A small self-contained page: the top functions by cumulative and by own time."""
    functions = document["functions"]
    title = (
        f"Python profile, steps {document.get('first_step')}-{document.get('last_step')} "
        f"({document.get('profiler')}, {document.get('timer')})"
    )
    head = "<tr><th>function</th><th>where</th><th>calls</th><th>own s</th><th>cumulative s</th>"
    style = (
        "body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "td:first-child,.w{text-align:left}.w{color:#666;font-size:12px}"
    )
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<h2>By cumulative time</h2><table>{head}{_rows(functions, 'cumulative_time')}</table>"
        f"<h2>By own time</h2><table>{head}{_rows(functions, 'total_time')}</table>"
        "</body></html>\n"
    )
