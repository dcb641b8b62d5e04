"""The change feed: followers wait for the store's next commit on the server's event loop.

The store tells :class:`ChangeFeed` of each commit (``MetadataStore.commits``, with its topic);
the feed turns that into one ``asyncio.Event`` that every waiting follower awaits, set and
replaced once per burst of commits (a commit only schedules the swap, and one already scheduled
covers the commits after it). So a follower holds no thread and no timer while it waits, any
number can wait at once, and a commit costs one wake-up however many follow. Each wait is bounded
(``MAX_WAIT_S``), and so is the number of followers waiting at once (``MAX_WAITERS``: past it an
answer comes at once, marked ``busy``, and the follower asks again a little later).

A follower's cursor is ``<run>-<version>``: ``run`` names this server's run (versions start
again at each start), so a cursor from before a restart is answered at once with every topic
asked for changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import threading
from collections.abc import Collection
from typing import Any

from trainops.store import COMMIT_TOPICS, CommitSignal

__all__ = ["MAX_WAITERS", "MAX_WAIT_S", "ChangeFeed", "parse_since"]

MAX_WAIT_S = 60.0
MAX_WAITERS = 4096
_CURSOR = re.compile(r"([0-9a-f]{12})-([0-9]{1,19})")


def parse_since(text: str) -> tuple[str, int]:
    """A cursor's run and version; ``ValueError`` saying what one looks like."""
    match = _CURSOR.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text[:40]!r} is not a cursor of this API (the `cursor` of an earlier answer)"
        )
    return match[1], int(match[2])


class ChangeFeed:
    """Waits for commits of a store (its :class:`~trainops.store.CommitSignal`)."""

    def __init__(self, commits: CommitSignal, *, max_waiters: int = MAX_WAITERS) -> None:
        self.commits = commits
        self.run = secrets.token_hex(6)
        self.max_waiters = max_waiters
        self.waiting = 0  # followers waiting now (read by tests and the bench)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._scheduled = threading.Lock()  # held from a commit's wake-up until the swap
        self._closing = False
        self._unsubscribe: Any = None

    async def start(self) -> None:
        """Follow the store's commits (from the server's event loop, e.g. in its lifespan)."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self._unsubscribe = self.commits.subscribe(self._committed)

    def stop(self) -> None:
        """Answer every follower now; later waits answer at once."""
        self._closing = True
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._committed("")

    def cursor(self) -> str:
        """Where the store is now: a follower asking ``since`` this hears of later commits."""
        return f"{self.run}-{self.commits.version}"

    def _committed(self, _topic: str) -> None:
        # On the committing thread: schedule one swap, unless one is scheduled already (it runs
        # after this commit, so its followers see it).
        if self._loop is None or not self._scheduled.acquire(blocking=False):
            return
        try:
            self._loop.call_soon_threadsafe(self._swap)
        except RuntimeError:  # the loop has ended
            self._scheduled.release()

    def _swap(self) -> None:
        self._scheduled.release()  # first: a commit from now on schedules another swap
        assert self._event is not None
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, topics: Collection[str], since: str | None, wait: float) -> dict[str, Any]:
        """``{"cursor", "changed"}``: which of ``topics`` changed after ``since``, waiting up to
        ``wait`` s for one to; without ``since``, the cursor of now at once."""
        if since is None:
            return {"cursor": self.cursor(), "changed": []}
        run, version = parse_since(since)
        if run != self.run:  # another run of the server: anything may have changed
            return {"cursor": self.cursor(), "changed": [t for t in COMMIT_TOPICS if t in topics]}
        if self.waiting >= self.max_waiters:
            return self._answer(topics, version) | {"busy": True}
        self.waiting += 1
        try:
            return await self._wait(topics, version, min(wait, MAX_WAIT_S))
        finally:
            self.waiting -= 1

    async def _wait(self, topics: Collection[str], version: int, wait: float) -> dict[str, Any]:
        assert self._event is not None, "the feed has not started"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            event = self._event  # taken before looking, so a later commit cannot be missed
            answer = self._answer(topics, version)
            remaining = deadline - loop.time()
            if answer["changed"] or remaining <= 0 or self._closing:
                return answer
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    def _answer(self, topics: Collection[str], version: int) -> dict[str, Any]:
        now = self.commits.version  # first: a commit after it is reported next time
        return {
            "cursor": f"{self.run}-{now}",
            "changed": self.commits.changed_since(version, topics),
        }
