"""The host's log: every line of the script and of the agent, to a file and to the reporter.

Script lines (stdout and stderr) are also scanned for metrics; agent lines (stream ``agent``)
are trainops' own progress and warnings and are kept apart from what the script printed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from trainops.agent._metrics import MetricScraper
from trainops.agent._reporter import Reporter
from trainops.protocol import EventKind

__all__ = ["AGENT_PREFIX", "HostLog", "LineSink"]

AGENT_PREFIX = "[trainops] "


class LineSink(Protocol):
    """Where a process's output lines go."""

    def __call__(self, stream: str, line: str, ts: float) -> None: ...


class HostLog:
    """Thread-safe writer of ``host.log`` that also reports lines and metric points."""

    def __init__(self, path: Path, reporter: Reporter, scraper: MetricScraper) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._reporter = reporter
        self._scraper = scraper
        self._lock = threading.Lock()
        self._file = path.open("a", encoding="utf-8", errors="replace")

    def line(self, stream: str, line: str, ts: float) -> None:
        """One line the script wrote on ``stream`` (``stdout`` or ``stderr``)."""
        self._write(line)
        self._reporter.emit(EventKind.LOG, {"stream": stream, "line": line})
        for name, value, at in self._scraper.scan(line, ts):
            self._reporter.emit(EventKind.METRIC, {"name": name, "value": value, "timestamp": at})

    def agent(self, message: str) -> None:
        """One line of the agent's own (progress, warnings, installer output)."""
        self._write(AGENT_PREFIX + message)
        self._reporter.emit(EventKind.LOG, {"stream": "agent", "line": message})

    def flush(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def _write(self, text: str) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.write(text + "\n")
