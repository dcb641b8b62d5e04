"""Metric scraping: the spec's regexes applied to every line the script writes.

As on SageMaker, each definition's first capture group (found with ``re.search``, so Python's
regex syntax and semantics) is the value; a capture that is not a finite number is ignored.

A user's regex may take exponential time (``(a+)+$`` against ``aaaa…!``) and Python's ``re``
holds the GIL while it runs, so :class:`MetricScanner` never runs one in the agent: lines are
queued (bounded) and scanned in a worker process (``_scrape_worker``) by a thread of their own.
Capturing output, heartbeats and stop requests never wait for it. A group of 64 searches that
takes longer than the time budget (default 2 s of the worker's CPU time, so a loaded machine where
the worker waits for a core does not count; 30 budgets of wall time at most) gets the worker
killed and its pattern disabled for the rest of the job, with a warning in the job log; the
worker restarts with the others.

Why not a linear-time engine (RE2) instead: its Python binding (google-re2) took about 3.7 µs a
search here against 0.14 µs for ``re``, lacks backreferences and lookaround, and differs from
Python's syntax in corners; the worker keeps SageMaker's semantics exactly and bounds the time.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import mmap
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, TypeAlias

from trainops.agent.reporting import _scrape_worker
from trainops.agent.reporting._worker_fork import ForkedWorker, take_spare
from trainops.protocol import MetricSpec

__all__ = ["DEFAULT_BUDGET_SECONDS", "MetricScanner", "MetricScraper"]

DEFAULT_BUDGET_SECONDS = 2.0
MAX_QUEUED_CHARS = 64 * 1024 * 1024
MAX_SCAN_LINES = 50_000  # lines sent to the worker at once
WORKER_RESTARTS = 5  # a worker that keeps dying (not by our hand) ends scraping with a warning
#: A pattern is over its budget past this many budgets of wall time, whatever its CPU time.
WALL_BUDGET_FACTOR = 30
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class MetricScraper:
    """Compiled metric definitions; :meth:`scan` turns a log line into metric points (in the
    calling thread: for trusted patterns and tests; the agent uses :class:`MetricScanner`)."""

    def __init__(self, definitions: Iterable[MetricSpec | tuple[str, str]]) -> None:
        self._patterns: list[tuple[str, re.Pattern[str]]] = []
        self.definitions: list[tuple[str, str]] = []
        for definition in definitions:
            name, regex = (
                (definition.name, definition.regex)
                if isinstance(definition, MetricSpec)
                else definition
            )
            pattern = re.compile(regex)
            if pattern.groups < 1:
                raise ValueError(f"metric {name!r}: regex {regex!r} needs a capture group")
            self._patterns.append((name, pattern))
            self.definitions.append((name, regex))

    def __bool__(self) -> bool:
        return bool(self._patterns)

    def scan_lines(self, lines: list[str]) -> dict[str, list[float]]:
        """The values each definition finds in ``lines``, in line order (names with none left
        out)."""
        found: dict[str, list[float]] = {}
        for name, pattern in self._patterns:
            values = found.setdefault(name, [])
            for match in map(pattern.search, lines):
                if match is not None and (value := _number(match.group(1))) is not None:
                    values.append(value)
        return {name: values for name, values in found.items() if values}

    def scan(self, line: str, ts: float) -> list[tuple[str, float, float]]:
        """``(name, value, ts)`` for every definition that matches ``line``."""
        points = []
        for name, pattern in self._patterns:
            match = pattern.search(line)
            if match is None or match.group(1) is None:
                continue
            try:
                value = float(match.group(1))
            except ValueError:
                continue
            if math.isfinite(value):
                points.append((name, value, ts))
        return points


_number = _scrape_worker.number

_Found: TypeAlias = "list[tuple[str, array[int], array[float]]]"  # (name, line indexes, values)

Values = Callable[[str, float, list[float]], None]
"""Where found values go: ``(metric name, timestamp, values)``."""


class MetricScanner:
    """Scans lines for metric values in a worker process, off the capture path.

    :meth:`submit` queues lines (never blocks; past 64 MiB queued, lines go unscanned with a
    warning); found values go to ``on_values`` from the scanner's thread; :meth:`drain` waits
    until what was submitted is scanned; :meth:`close` stops the worker.
    """

    def __init__(
        self,
        scraper: MetricScraper,
        on_values: Values,
        warn: Callable[[str], None],
        *,
        budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    ) -> None:
        self._definitions = list(scraper.definitions)
        self._on_values = on_values
        self._warn = warn
        self._budget = budget_seconds
        self._cond = threading.Condition()
        self._queue: list[tuple[list[str], float]] = []
        self._queued_chars = 0
        self._busy = False
        self._closed = False
        self._skipped = 0
        self._worker: _Worker | None = None
        self._thread = threading.Thread(target=self._run, name="agent-metrics", daemon=True)
        if self._definitions:
            self._thread.start()

    def submit(self, lines: list[str], ts: float) -> None:
        if not self._definitions:
            return
        size = sum(map(len, lines))
        with self._cond:
            if self._closed:
                return
            behind = self._queued_chars + size > MAX_QUEUED_CHARS
            first = behind and not self._skipped
            if behind:
                self._skipped += len(lines)
            else:
                self._queue.append((lines, ts))
                self._queued_chars += size
                self._cond.notify()
        if first:
            self._warn(
                f"metric scraping is {MAX_QUEUED_CHARS // 2**20} MiB behind the script's"
                " output: lines are not scanned for metrics until it catches up"
            )

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until everything submitted is scanned; ``False`` if ``timeout`` ran out."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._queue or self._busy) and self._thread.is_alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float = 30.0) -> None:
        self.drain(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(self._budget + 5.0)
        if self._worker is not None:
            self._worker.stop()
        if self._skipped:
            self._warn(f"{self._skipped} line(s) were not scanned for metrics")

    def _run(self) -> None:
        self._start_worker()
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = self._take()
                self._busy = True
            try:
                self._scan(batch)
            except Exception as exc:  # scraping must never take the agent down
                self._warn(f"metric scraping stopped: {type(exc).__name__}: {exc}")
                self._definitions = []
            finally:
                with self._cond:
                    self._busy = False
                    if not self._definitions:
                        self._queue.clear()
                        self._queued_chars = 0
                    self._cond.notify_all()

    def _start_worker(self) -> None:
        """Start the worker before the first line comes: it is a Python of its own, whose start
        would otherwise wait for the script's first output, which a short job writes as it
        ends, just before its metrics must all be in. A worker that cannot start now is tried
        again (and its failure told) when lines come. The agent's first one was forked ahead of
        time (``_worker_fork``), without an interpreter's start."""
        with contextlib.suppress(OSError):
            self._worker = _Worker(self._definitions, take_spare())

    def _take(self) -> list[tuple[list[str], float]]:
        taken, count = [], 0
        while self._queue and count < MAX_SCAN_LINES:
            lines, ts = self._queue.pop(0)
            taken.append((lines, ts))
            count += len(lines)
            self._queued_chars -= sum(map(len, lines))
        return taken

    def _scan(self, batch: list[tuple[list[str], float]]) -> None:
        lines = [line for part, _ts in batch for line in part]
        found = self._scan_in_worker(lines)
        if not found:
            return
        bounds, start = [], 0
        for part, ts in batch:
            start += len(part)
            bounds.append((start, ts))
        for name, at_lines, values in found:
            self._deliver(name, at_lines, values, bounds)

    def _deliver(
        self,
        name: str,
        at_lines: Sequence[int],
        values: array[float],
        bounds: list[tuple[int, float]],
    ) -> None:
        """Values of ``name`` found on lines ``at_lines`` (ascending), passed on per submitted
        part (``bounds``: where each part ends, and its time)."""
        first = 0
        for end, ts in bounds:
            last = bisect.bisect_left(at_lines, end, first)
            if last > first:
                self._on_values(name, ts, values[first:last].tolist())
            first = last

    def _scan_in_worker(self, lines: list[str]) -> _Found:
        deaths = 0
        while self._definitions:
            if self._worker is None:
                self._worker = _Worker(self._definitions)
            outcome = self._worker.scan(lines, self._budget)
            if isinstance(outcome, list):
                return outcome
            self._worker.stop()
            self._worker = None
            if outcome is None:  # it died on its own
                deaths += 1
                if deaths >= WORKER_RESTARTS:
                    self._warn("the metric scraping worker keeps failing: metrics are off")
                    self._definitions = []
                continue
            name, regex = self._definitions.pop(outcome)
            self._warn(
                f"metric {name!r} is disabled: its regex {regex!r} took longer than"
                f" {self._budget:g} s on a line of the job's output"
            )
        return []


class _Worker:
    """One ``_scrape_worker`` process and the progress counters it shares with us."""

    def __init__(
        self, definitions: list[tuple[str, str]], forked: ForkedWorker | None = None
    ) -> None:
        """Start a worker as a script, or take ``forked`` (one forked ahead: ``_worker_fork``)."""
        self._proc: subprocess.Popen[bytes] | ForkedWorker
        if forked is not None:
            self._shared, self._proc = forked.shared, forked
        else:
            self._shared = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker)
            self._shared.truncate(24)
            fd = self._shared.fileno()
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(_scrape_worker.__file__)), str(fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                pass_fds=(fd,),
            )
        self._map = mmap.mmap(self._shared.fileno(), 24)
        self._progress = memoryview(self._map).cast("q")
        self._send(json.dumps(definitions).encode())

    def scan(self, lines: list[str], budget: float) -> _Found | int | None:
        """The values found; else the index of the pattern that ran over ``budget`` seconds, or
        ``None`` if the worker died."""
        stdout = self._stdout
        try:
            self._send("\n".join(lines).encode("utf-8", errors="replace"))
        except OSError:
            return None
        last, since, cpu_since = self._progress[0], time.monotonic(), self._cpu()
        while True:
            ready, _w, _x = select.select([stdout], [], [], min(0.1, budget))
            if ready:
                frame = _scrape_worker.read_frame(stdout)
                if frame is None:
                    return None
                try:
                    return _scrape_worker.decode_found(frame)
                except (ValueError, struct.error):
                    return None  # not what the worker writes: treat it as dead
            now, seen = time.monotonic(), self._progress[0]
            if seen != last:
                last, since, cpu_since = seen, now, self._cpu()
            elif self._over(now - since, cpu_since, budget):
                return int(self._progress[1])
            if self._proc.poll() is not None:
                return None

    def _cpu(self) -> float | None:
        """The worker's CPU seconds so far (user + system), or None where /proc cannot say."""
        try:
            with open(f"/proc/{self._proc.pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            return None

    def _over(self, waited: float, cpu_since: float | None, budget: float) -> bool:
        """Whether the pattern now running is over ``budget``: judged by the CPU time the worker
        spent on it, so a worker that waits for a core on a loaded machine is not mistaken for
        a slow regex; by the wall clock where /proc cannot say, and past
        :data:`WALL_BUDGET_FACTOR` budgets whatever the CPU time (a stopped worker)."""
        if waited <= budget:
            return False
        cpu = self._cpu()
        if cpu is None or cpu_since is None:
            return True
        return cpu - cpu_since > budget or waited > budget * WALL_BUDGET_FACTOR

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._progress.release()
        self._map.close()
        self._shared.close()

    @property
    def _stdout(self) -> IO[bytes]:
        assert self._proc.stdout is not None
        return self._proc.stdout

    def _send(self, payload: bytes) -> None:
        assert self._proc.stdin is not None
        _scrape_worker.write_frame(self._proc.stdin, payload)
