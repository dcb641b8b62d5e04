"""The worker processes of ``trainops pack``: one shard per task, progress through a queue.

Workers are started with ``spawn`` (a forked copy of a process holding an object-store client
and its threads may deadlock), each gets an equal share of the shards, and the parent drains
the progress queue while it waits. A failing shard stops its worker (the shards it finished
are kept for a re-run); the other workers finish theirs, and the first error is raised as is.
"""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from trainops.data._errors import PackError
from trainops.data._index import ShardInfo
from trainops.data._pack_worker import ShardTask, init_worker, run_batch

__all__ = ["run_pool"]

_POLL_SECONDS = 0.1
_BROKEN = (
    "a pack worker process died before it finished (killed, or out of memory); run the "
    "same pack again to continue it. From a Python script, call trainops.data.pack under "
    "`if __name__ == '__main__':` (its workers are spawned and import the script)"
)


def run_pool(
    tasks: list[ShardTask], workers: int, advance: Callable[[int, int], None]
) -> dict[int, ShardInfo]:
    """Run every task on ``workers`` processes; shard number -> its info.

    Worker ``w`` gets shards ``w, w + workers, w + 2 workers, ...`` as one batch, so that it
    can build one shard while it publishes the previous one (shards are of one size, so the
    static split balances)."""
    context = multiprocessing.get_context("spawn")
    progress, stop = context.Queue(), context.Event()
    batches = [tasks[w::workers] for w in range(min(workers, len(tasks)))]
    pool = ProcessPoolExecutor(
        len(batches), mp_context=context, initializer=init_worker, initargs=(progress, stop)
    )
    try:
        futures = [pool.submit(run_batch, batch) for batch in batches]
        try:
            _wait_all(futures, progress, advance)
        except BaseException:
            stop.set()  # the other workers stop after their current shard
            raise
        return {
            task.number: info
            for batch, future in zip(batches, futures, strict=True)
            for task, info in zip(batch, future.result(), strict=True)
        }
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _drain(progress, advance)
        progress.close()
        progress.join_thread()


def _wait_all(
    futures: list[Future[list[ShardInfo]]], progress: object, advance: Callable[[int, int], None]
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


def _drain(progress: object, advance: Callable[[int, int], None]) -> None:
    while True:
        try:
            files, size = progress.get_nowait()  # type: ignore[attr-defined]
        except queue.Empty:
            return
        advance(files, size)
