"""The processes of ``trainops pack``: the parent and its helpers claim shards one at a time.

``--workers N`` is the parent plus N - 1 helper processes. The helpers are spawned (a forked
copy of a process holding an object-store client and its threads may deadlock) as soon as the
pack starts, so that their start (a fresh interpreter importing the packer) overlaps the
parent's listing of SRC. Then every process, the parent included, claims the next shard from
one shared counter whenever it is free: nobody waits on a fixed share while another process
is idle, and who packs which shard does not change a byte. The tasks go to the helpers
pickled one by one, compactly (``ShardTask``), and a helper decodes only those it claims.
Progress comes back through a queue only when a progress bar is drawn.

A failing shard stops its process (the shards it finished are kept for a re-run); the others
stop after their current shard, and the first error is raised as is.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from trainops.data._errors import PackError
from trainops.data.packer._dest import PackDest, open_dest
from trainops.data.packer._worker import (
    ShardTask,
    claimed,
    init_worker,
    pack_shards,
    run_claimed,
    warm,
)
from trainops.data.shards._index import ShardInfo

__all__ = ["PackPool", "run_pool"]

Advance = Callable[[int, int], None]
_POLL_SECONDS = 0.1
_BROKEN = (
    "a pack worker process died before it finished (killed, or out of memory); run the "
    "same pack again to continue it. From a Python script, call trainops.data.pack under "
    "`if __name__ == '__main__':` (its workers are spawned and import the script)"
)


class PackPool:
    """The parent and ``helpers`` spawned processes (none: the parent alone), for one run."""

    def __init__(self, helpers: int, progress: bool) -> None:
        self._helpers = max(helpers, 0)
        self._executor: ProcessPoolExecutor | None = None
        self._progress: Any = None
        if self._helpers:
            context = multiprocessing.get_context("spawn")
            self._progress = context.Queue() if progress else None
            self._stop, self._next = context.Event(), context.Value("q", 0)
            self._executor = ProcessPoolExecutor(
                self._helpers,
                mp_context=context,
                initializer=init_worker,
                initargs=(self._progress, self._stop, self._next),
            )
            for _ in range(self._helpers):
                self._executor.submit(warm)  # spawned now, not when the tasks are known

    def __enter__(self) -> PackPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self, tasks: list[ShardTask], dest: PackDest, advance: Advance | None
    ) -> dict[int, ShardInfo]:
        """Pack every task, showing progress with ``advance`` (None: no progress shown);
        shard number -> its info."""
        if self._executor is None or len(tasks) <= 1:
            return pack_shards(tasks, dest, advance)
        pickled = [pickle.dumps(task, pickle.HIGHEST_PROTOCOL) for task in tasks]
        try:
            futures = [self._executor.submit(run_claimed, pickled) for _ in range(self._helpers)]
        except BrokenProcessPool:
            raise PackError(_BROKEN) from None
        try:
            infos = self._pack_here(tasks, dest, advance, futures)
            _wait_all(futures, self._progress, advance or _ignore)
        except BaseException:
            self._stop.set()  # the other processes stop after their current shard
            raise
        for future in futures:
            infos.update(future.result())
        self.close(advance)  # a helper's last progress is sent as it exits
        return infos

    def _pack_here(
        self,
        tasks: list[ShardTask],
        dest: PackDest,
        advance: Advance | None,
        futures: list[Future[dict[int, ShardInfo]]],
    ) -> dict[int, ShardInfo]:
        """The parent's part: claimed tasks, packed here, the helpers' progress shown as it
        comes; stops once a helper failed."""

        def progress(files: int, size: int) -> None:
            assert advance is not None
            advance(files, size)
            _drain(self._progress, advance)

        def stopped() -> bool:
            return self._stop.is_set() or any(_failed(future) for future in futures)

        mine = (tasks[position] for position in claimed(len(tasks), self._next))
        return pack_shards(mine, dest, progress if advance else None, stopped)

    def close(self, advance: Advance | None = None) -> None:
        """Wait for the helpers (they stop after their current shard once told to), showing
        their last progress with ``advance``."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            if self._progress is not None:
                _drain(self._progress, advance or _ignore)
                self._progress.close()
                self._progress.join_thread()


def run_pool(tasks: list[ShardTask], workers: int, advance: Advance | None) -> dict[int, ShardInfo]:
    """Run every task on ``workers`` processes (the caller's included); shard number -> info."""
    with PackPool(workers - 1, progress=advance is not None) as pool:
        return pool.run(tasks, open_dest(tasks[0].dest), advance)


def _ignore(files: int, size: int) -> None:
    """The progress callback when no bar is drawn: the counts are dropped."""
    del files, size


def _failed(future: Future[Any]) -> bool:
    return future.done() and future.exception() is not None


def _wait_all(
    futures: list[Future[dict[int, ShardInfo]]], progress: object, advance: Advance
) -> None:
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_EXCEPTION)
        _drain(progress, advance)
        for future in done:
            error = future.exception()
            if isinstance(error, BrokenProcessPool):
                raise PackError(_BROKEN) from None
            if error is not None:
                raise error


def _drain(progress: Any, advance: Advance) -> None:
    while progress is not None:
        try:
            files, size = progress.get_nowait()
        except queue.Empty:
            return
        advance(files, size)
