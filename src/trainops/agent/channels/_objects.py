"""Read-ahead for a Pipe channel: ranged reads of the coming objects, in parallel, in order.

An epoch's objects are cut into spans (a small object is one span, a large one a span per
``chunk`` bytes). Up to ``lanes`` spans are read at once, by a thread pool the channel keeps,
and the writer takes their bytes in the epoch's order. What has been asked for but not yet taken
never exceeds ``budget`` bytes (one span is always allowed, so a span larger than the budget
still moves), so a reader slower than storage holds the writer, not memory.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from trainops._errors import StorageError
from trainops.agent.channels._fifo import Stopped
from trainops.storage import ObjectInfo, ObjectStore

__all__ = ["ReadAhead", "Span", "spans_of"]

_WAIT_S = 0.1  # how often a writer waiting for bytes looks whether it should stop


@dataclass(frozen=True, slots=True)
class Span:
    """Bytes ``start`` to ``end`` of the object at ``uri``."""

    uri: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def spans_of(info: ObjectInfo, chunk: int) -> list[Span]:
    """The spans of one object, in order (none for an empty one)."""
    return [Span(info.uri, at, min(at + chunk, info.size)) for at in range(0, info.size, chunk)]


class ReadAhead:
    """The bytes of ``spans`` in order; reads run ahead of :meth:`take` within the budget."""

    def __init__(
        self,
        spans: Iterable[Span],
        store_for: Callable[[str], ObjectStore],
        pool: ThreadPoolExecutor,
        *,
        budget: int,
        lanes: int,
        stopping: Callable[[], bool],
    ) -> None:
        self._spans: Iterator[Span] = iter(spans)
        self._next: Span | None = next(self._spans, None)
        self._store_for = store_for
        self._pool = pool
        self._budget = budget
        self._lanes = lanes
        self._stopping = stopping
        self._ahead: collections.deque[tuple[Span, Future[bytes]]] = collections.deque()
        self._held = 0
        self.peak = 0  # the most bytes asked for and not yet taken, so far

    def take(self) -> bytes:
        """The next span's bytes (waits for them; raises :class:`StorageError` if it failed)."""
        self._fill()
        if not self._ahead:
            raise StorageError("read-ahead: no span left to take (the stream is out of step)")
        span, future = self._ahead.popleft()
        data = self._wait(future)
        self._held -= span.size
        if len(data) != span.size:
            raise StorageError(
                f"{span.uri}: expected {span.size} bytes at offset {span.start}, got {len(data)}"
                " (the object changed since it was listed)"
            )
        self._fill()
        return data

    def close(self) -> None:
        """Drop what has not started; what runs finishes in the pool and is thrown away."""
        while self._ahead:
            self._ahead.popleft()[1].cancel()
        self._held = 0

    def _fill(self) -> None:
        while self._next is not None and len(self._ahead) < self._lanes:
            span = self._next
            if self._ahead and self._held + span.size > self._budget:
                return
            self._ahead.append((span, self._pool.submit(self._read, span)))
            self._held += span.size
            self.peak = max(self.peak, self._held)
            self._next = next(self._spans, None)

    def _read(self, span: Span) -> bytes:
        return self._store_for(span.uri).get_range(span.uri, span.start, span.end)

    def _wait(self, future: Future[bytes]) -> bytes:
        while True:
            if self._stopping():
                raise Stopped
            try:
                return future.result(timeout=_WAIT_S)
            except FutureTimeout:
                continue
