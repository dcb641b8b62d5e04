"""The host's log: every line of the script and of the agent, to a file and to the reporter.

Script lines (stdout and stderr) are also scanned for metrics; agent lines (stream ``agent``)
are trainops' own progress and warnings and are kept apart from what the script printed. The
agent's own lines pass through ``mask`` (the job's secrets masked) before they are written or
reported; the script's lines are kept as the script wrote them (views mask them when read).

``host.log`` keeps every line whole. A line reported to the control plane is cut to
:data:`MAX_REPORTED_CHARS` (1 MiB) characters, and a cut line says so at its end:
``… [trainops: line cut at 1048576 of 10485760 characters]``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from trainops.agent.reporting._metrics import DEFAULT_BUDGET_SECONDS, MetricScanner, MetricScraper
from trainops.agent.reporting._reporter import Reporter
from trainops.protocol import EventKind

__all__ = ["AGENT_PREFIX", "MAX_REPORTED_CHARS", "HostLog", "LineSink", "cut_line"]

AGENT_PREFIX = "[trainops] "
MAX_REPORTED_CHARS = 1024 * 1024
EVENT_ITEMS = 20_000  # lines or points per event at most
EVENT_CHARS = 1024 * 1024  # characters of lines per event at most (unless one line is longer)


def cut_line(line: str, limit: int = MAX_REPORTED_CHARS) -> str:
    """``line`` if it has at most ``limit`` characters, else its start and a marker saying so."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [trainops: line cut at {limit} of {len(line)} characters]"


class LineSink(Protocol):
    """Where a process's output lines go: the lines read at once from one stream, at ``ts``."""

    def __call__(self, stream: str, lines: list[str], ts: float) -> None: ...


MetricListener = Callable[[str, float, list[float]], None]


class HostLog:
    """Thread-safe writer of ``host.log`` that also reports lines and metric points."""

    def __init__(
        self,
        path: Path,
        reporter: Reporter,
        scraper: MetricScraper,
        *,
        regex_budget_seconds: float = DEFAULT_BUDGET_SECONDS,
        mask: Callable[[str], str] | None = None,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._mask = mask
        self._reporter = reporter
        self._lock = threading.Lock()
        # Private (0600): the script's lines are kept as written and may hold its secrets.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8", errors="replace")
        self._scanner = MetricScanner(
            scraper, self._values, self._warn, budget_seconds=regex_budget_seconds
        )
        self._metric_listeners: list[MetricListener] = []

    def add_metric_listener(self, listener: MetricListener) -> None:
        """Also hand every scraped metric value to ``listener(name, ts, values)`` (on the
        scanner's thread; a listener must be quick and must not raise)."""
        self._metric_listeners.append(listener)

    def lines(self, stream: str, lines: list[str], ts: float) -> None:
        """Lines the script wrote on ``stream`` (``stdout`` or ``stderr``), read at ``ts``."""
        self.rank_lines(None, stream, lines, ts)

    def rank_lines(self, rank: int | None, stream: str, lines: list[str], ts: float) -> None:
        """Lines one process of the job wrote; ``rank`` tags them where the host runs several
        ranks (``host.log`` shows ``[rank N]`` before each, events carry ``rank``)."""
        if not lines:
            return
        tag = "" if rank is None else f"[rank {rank}] "
        self._write("\n".join(tag + line for line in lines) if tag else "\n".join(lines))
        if max(map(len, lines)) > MAX_REPORTED_CHARS:
            lines = [cut_line(line) for line in lines]
        extra = {} if rank is None else {"rank": rank}
        for batch in _batches(lines):
            self._reporter.emit(EventKind.LOG, {"stream": stream, "lines": batch, **extra})
        self._scanner.submit(lines, ts)

    def line(self, stream: str, line: str, ts: float) -> None:
        """One line the script wrote on ``stream``."""
        self.lines(stream, [line], ts)

    def agent(self, message: str) -> None:
        """One line of the agent's own (progress, warnings, installer output)."""
        if self._mask is not None:
            message = self._mask(message)
        self._write(AGENT_PREFIX + message)
        self._reporter.emit(EventKind.LOG, {"stream": "agent", "line": message})

    def flush(self) -> None:
        """Write out ``host.log`` and report the metric values of every line so far."""
        self._scanner.drain()
        with self._lock, contextlib.suppress(OSError):
            if not self._file.closed:
                self._file.flush()

    def close(self) -> None:
        self._scanner.close()
        with self._lock, contextlib.suppress(OSError):
            self._file.close()

    def _values(self, name: str, ts: float, values: list[float]) -> None:
        for listener in self._metric_listeners:
            try:
                listener(name, ts, values)
            except Exception as exc:  # a listener's bug must not cost the job its metrics
                self._warn(f"a metric listener failed: {type(exc).__name__}: {exc}")
        for start in range(0, len(values), EVENT_ITEMS):
            chunk = values[start : start + EVENT_ITEMS]
            self._reporter.emit(EventKind.METRIC, {"name": name, "timestamp": ts, "values": chunk})

    def _warn(self, message: str) -> None:
        self.agent(f"WARNING: {message}")

    def _write(self, text: str) -> None:
        with self._lock, contextlib.suppress(OSError):  # a full disk: the events still carry it
            if not self._file.closed:
                self._file.write(text + "\n")


def _batches(lines: list[str]) -> list[list[str]]:
    """``lines`` in groups of at most :data:`EVENT_ITEMS` lines and about :data:`EVENT_CHARS`
    characters, so that no event is much larger than the longest line it carries."""
    if len(lines) <= EVENT_ITEMS and sum(map(len, lines)) <= EVENT_CHARS:
        return [lines]
    batches: list[list[str]] = [[]]
    size = 0
    for line in lines:
        if batches[-1] and (size + len(line) > EVENT_CHARS or len(batches[-1]) >= EVENT_ITEMS):
            batches.append([])
            size = 0
        batches[-1].append(line)
        size += len(line)
    return batches
