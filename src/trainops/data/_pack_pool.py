"""The worker processes of ``trainops pack``: one shard per task, progress through a queue.

Workers are started with ``spawn`` (a forked copy of a process holding an object-store client
and its threads may deadlock), each shard is one task, and the parent drains the progress
queue while it waits. The first failing shard stops the pool: queued shards are cancelled,
running ones finish (a re-run keeps them), and its error is raised as is.
"""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait

from trainops.data._index import ShardInfo
from trainops.data._pack_worker import ShardTask, init_worker, run_task

__all__ = ["run_pool"]

_POLL_SECONDS = 0.1


def run_pool(
    tasks: list[ShardTask], workers: int, advance: Callable[[int, int], None]
) -> dict[int, ShardInfo]:
    """Run every task on ``workers`` processes; shard number -> its info."""
    context = multiprocessing.get_context("spawn")
    progress = context.Queue()
    pool = ProcessPoolExecutor(
        min(workers, len(tasks)), mp_context=context, initializer=init_worker, initargs=(progress,)
    )
    try:
        futures = {pool.submit(run_task, task): task.number for task in tasks}
        _wait_all(list(futures), progress, advance)
        return {number: future.result() for future, number in futures.items()}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _drain(progress, advance)
        progress.close()
        progress.join_thread()


def _wait_all(
    futures: list[Future[ShardInfo]], progress: object, advance: Callable[[int, int], None]
) -> None:
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_EXCEPTION)
        _drain(progress, advance)
        for future in done:
            if future.exception() is not None:
                raise future.exception()  # type: ignore[misc]


def _drain(progress: object, advance: Callable[[int, int], None]) -> None:
    while True:
        try:
            files, size = progress.get_nowait()  # type: ignore[attr-defined]
        except queue.Empty:
            return
        advance(files, size)
