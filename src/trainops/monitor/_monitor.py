"""The system monitor: a thread that samples the host on a fixed schedule into profiler chunks.

Samples are taken every ``interval_ms`` on a monotonic schedule (tick *k* is due at start +
*k* x interval, so the rate does not drift; a tick missed under load is skipped, not caught up
in a burst), plus one at stop for the stretch since the last tick, and appended to a
:class:`~trainops.profiler.SeriesWriter` under ``system/<host>/<attempt>-<seq>.tsc``. Chunks are written every couple of seconds at first, so a
reader sees a running job's data at once, and further apart as the job runs on (at most
``max_rotate_seconds``), so a long job does not leave tens of thousands of objects. The
host's ``meta/<host>.json`` is written once the sampler is open.

The monitor never raises into its owner: a failure to start or to sample is logged once
through ``log`` and the monitor carries on (or ends, where it cannot sample at all).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from trainops.monitor._sampler import SystemSampler
from trainops.profiler._layout import chunk_prefix, meta_path, system_dir
from trainops.profiler._names import META_KEYS
from trainops.profiler._series import SeriesWriter

__all__ = ["SystemMonitor", "write_meta"]

MIN_ROTATE_SECONDS = 1.5
STOP_TIMEOUT = 10.0
#: At stop, the time since the last sample is sampled too when it is at least this long
#: (shorter, the CPU counters, in 10 ms jiffies, would say little), or when there was none.
FINAL_SAMPLE_SECONDS = 0.05


def write_meta(root: Path, host: str, meta: dict[str, Any]) -> Path:
    """Write ``meta/<host>.json`` under ``root`` atomically (a temporary name renamed)."""
    missing = [key for key in META_KEYS if key not in meta]
    if missing:
        raise ValueError(f"meta/{host}.json lacks {', '.join(missing)}")
    path = root / meta_path(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


class SystemMonitor:
    """Samples the host every ``interval_ms`` into the profiler tree at ``root``.

    ``cores`` and ``gpus`` choose what is measured (see :class:`SystemSampler`);
    ``rotate_seconds`` fixes the chunk period (default: from 1.5 s growing with the job's age
    to ``max_rotate_seconds``). :meth:`start` returns at once; :meth:`stop` writes the last
    chunk and returns when the thread has ended.
    """

    def __init__(
        self,
        root: Path,
        host: str,
        *,
        interval_ms: int = 500,
        attempt: int = 1,
        instance_type: str = "",
        cores: Iterable[int] | None = None,
        gpus: Iterable[int] | bool | None = None,
        log: Callable[[str], None] | None = None,
        rotate_seconds: float | None = None,
        max_rotate_seconds: float = 30.0,
        sampler: Callable[[], SystemSampler] | None = None,
    ) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, not {interval_ms}")
        self.root = root
        self.host = host
        self.interval_ms = interval_ms
        self.attempt = attempt
        self.instance_type = instance_type
        self.rotate_seconds = rotate_seconds
        self.max_rotate_seconds = max_rotate_seconds
        self._cores = None if cores is None else list(cores)
        self._gpus = gpus if gpus is None or isinstance(gpus, bool) else list(gpus)
        self._make_sampler = sampler or self._default_sampler
        self._log = log or (lambda line: None)
        self._logged: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()  # set once meta is written (or the monitor gave up)
        self.meta: dict[str, Any] = {}
        self.rows = 0
        self.chunks: list[Path] = []
        self.failed: str | None = None

    def _default_sampler(self) -> SystemSampler:
        return SystemSampler(cores=self._cores, gpus=self._gpus)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start sampling on a thread of its own (a second call does nothing)."""
        if self._thread is not None:
            return
        self._stop.clear()
        thread = threading.Thread(target=self._run, name="system-monitor", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:  # no thread can be started: the job goes on unmonitored
            self._once("start", f"System monitor: could not start ({exc}); no system metrics")
            self.ready.set()
            return
        self._thread = thread

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop sampling, write the last chunk, and wait (up to ``timeout`` s) for the thread."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                self._once("stop", f"System monitor: still sampling after {timeout:g} s; left")

    # The thread --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            sampler = self._make_sampler()
        except Exception as exc:
            self._give_up(f"cannot read the host's counters ({type(exc).__name__}: {exc})")
            return
        try:
            self._sample_until_stopped(sampler)
        except Exception as exc:
            self._give_up(f"stopped ({type(exc).__name__}: {exc})")
        finally:
            sampler.close()

    def _give_up(self, why: str) -> None:
        self.failed = why
        self._once("failed", f"System monitor: {why}; no more system metrics from this host")
        self.ready.set()

    def _sample_until_stopped(self, sampler: SystemSampler) -> None:
        self.meta = self._meta(sampler)
        write_meta(self.root, self.host, self.meta)
        gpus = len(self.meta["gpus"])
        gpu_line = f"{gpus} GPU(s) through NVML" if gpus else f"GPU metrics {sampler.gpu_status}"
        self._once(
            "started",
            f"System monitor: every {self.interval_ms} ms, {len(sampler.cores)} core(s), "
            f"{gpu_line}",
        )
        self.ready.set()
        header = {
            "kind": "system",
            "host": self.host,
            "attempt": self.attempt,
            "interval_ms": self.interval_ms,
        }
        writer = SeriesWriter(
            self.root / system_dir(self.host),
            header,
            sampler.columns,
            prefix=chunk_prefix(self.attempt),
            rotate_seconds=self._rotation(0.0),
        )
        writer.sequence = len(self.chunks)  # started again: carry on numbering, never overwrite
        try:
            self._loop(sampler, writer)
        finally:
            self._flush(writer)

    def _loop(self, sampler: SystemSampler, writer: SeriesWriter) -> None:
        interval = self.interval_ms / 1000.0
        began = time.monotonic()
        tick = 1
        last, rows = began, self.rows
        while not self._stop.wait(max(0.0, began + tick * interval - time.monotonic())):
            self._take(sampler, writer)
            last = time.monotonic()
            age = last - began
            writer.rotate_seconds = self._rotation(age)
            tick = max(tick + 1, math.floor(age / interval) + 1)
        if self.rows == rows or time.monotonic() - last >= FINAL_SAMPLE_SECONDS:
            self._take(sampler, writer)  # the stretch since the last tick (a short job's only)

    def _take(self, sampler: SystemSampler, writer: SeriesWriter) -> None:
        try:
            row = sampler.row()
        except Exception as exc:  # one bad read: log the first, keep the schedule
            self._once("sample", f"System monitor: a sample failed ({exc}); skipping it")
            return
        done = writer.append(row)
        self.rows += 1
        if done is not None:
            self.chunks.append(done)

    def _flush(self, writer: SeriesWriter) -> None:
        try:
            done = writer.close()
        except OSError as exc:
            self._once("flush", f"System monitor: writing the last chunk failed ({exc})")
            return
        if done is not None:
            self.chunks.append(done)

    def _rotation(self, age: float) -> float:
        if self.rotate_seconds is not None:
            return self.rotate_seconds
        return min(self.max_rotate_seconds, max(MIN_ROTATE_SECONDS, age / 60.0))

    def _meta(self, sampler: SystemSampler) -> dict[str, Any]:
        return {
            "host": self.host,
            "instance_type": self.instance_type,
            "cores": len(sampler.cores),
            "memory_bytes": sampler.memory_total,
            "gpus": sampler.gpu_info,
            "gpu_status": sampler.gpu_status,
            "interval_ms": self.interval_ms,
            "attempt": self.attempt,
            "started": time.time(),
        }

    def _once(self, key: str, line: str) -> None:
        if key in self._logged:
            return
        self._logged.add(key)
        try:
            self._log(line)
        except Exception:
            return
