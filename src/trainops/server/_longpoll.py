"""Log long-polls that hold no thread while they wait.

A ``logs?wait=30`` request awaits an asyncio event instead of blocking a worker thread, so any
number of them can wait at once without starving the routes that run on threads (agent reports
above all). One watcher thread per server turns the controller's change counter into that event;
the short store reads of a poll run on a small thread pool of their own, never the shared one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

import anyio.to_thread
from anyio import CapacityLimiter

from trainops.control import ENDED, JobController
from trainops.store import JobRecord, LogChunk

__all__ = ["LogWaiter"]

_WATCH_TIMEOUT_S = 0.5
_READ_THREADS = 8


class LogWaiter:
    """Answers log reads, waiting (asynchronously) for a line or a status change."""

    def __init__(self, controller: JobController) -> None:
        self.controller = controller
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._limiter: CapacityLimiter | None = None
        self.waiting = 0  # long-polls waiting now (read by tests)

    async def start(self) -> None:
        """Start watching (from the server's event loop, e.g. in its lifespan)."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._limiter = CapacityLimiter(_READ_THREADS)
        self._thread = threading.Thread(target=self._watch, name="trainops-log-feed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._wake()

    def _watch(self) -> None:
        version = self.controller.change_version
        while not self._stopped.is_set():
            fresh = self.controller.wait_for_change(version, _WATCH_TIMEOUT_S)
            closing = self.controller.closing
            if fresh != version or closing:
                version = fresh
                self._wake()
            if closing:
                return

    def _wake(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already ended
                self._loop.call_soon_threadsafe(self._swap)

    def _swap(self) -> None:
        """Release every waiter of the current event and give later waiters a fresh one."""
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    async def lines(
        self, name: str, after: int, host: str | None, limit: int, wait: float
    ) -> tuple[JobRecord, list[LogChunk]]:
        """Lines after ``after`` (as chunks); with none yet, wait up to ``wait`` s for one or a
        status change."""
        assert self._changed is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        # Taken before reading, so a change committed after the read cannot be missed.
        changed = self._changed
        first, lines = await self._read(name, after, host, limit)
        job = first
        self.waiting += 1
        try:
            while not lines and job.status not in ENDED and not self.controller.closing:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), remaining)
                changed = self._changed
                job, lines = await self._read(name, after, host, limit)
                if (job.status, job.secondary_status) != (first.status, first.secondary_status):
                    break
        finally:
            self.waiting -= 1
        return job, lines

    async def _read(
        self, name: str, after: int, host: str | None, limit: int
    ) -> tuple[JobRecord, list[LogChunk]]:
        def read() -> tuple[JobRecord, list[LogChunk]]:
            # Lines first: an agent's events are stored in order, so the status read after them
            # is at least the one they were written under (a page never shows a script's first
            # line beside the status from before its Training transition).
            self.controller.job(name)  # an unknown job is a 404 before anything is read
            chunks = self.controller.store.log_chunks(name, after=after, host=host, limit=limit)
            return self.controller.job(name), chunks

        return await anyio.to_thread.run_sync(read, limiter=self._limiter)
