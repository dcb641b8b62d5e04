"""Steps written off the training thread: a bounded queue in front of one ``TensorFileWriter``.

The training thread hands over a step's host arrays and goes on; one daemon thread writes them
in order. The queue holds at most :data:`QUEUE_STEPS` steps, so a slow disk slows the script
instead of filling its memory. A write that fails turns the writer off with one line on stderr
(the script is never failed by its debugger). :meth:`StepWriter.close` waits for what is queued.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np

from trainops.debugger.format import TensorFileWriter

__all__ = ["QUEUE_STEPS", "StepWriter"]

QUEUE_STEPS = 4

_Job = Callable[[TensorFileWriter], None]


class StepWriter:
    """Writes steps of one worker under ``out_dir`` on a background thread."""

    def __init__(self, out_dir: str, worker: str) -> None:
        self.worker = worker
        self._writer = TensorFileWriter(out_dir, worker)
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=QUEUE_STEPS)
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="trainops-debugger", daemon=True)
        self._thread.start()

    def write_step(
        self, step: int, mode: int, mode_step: int, tensors: Sequence[tuple[str, np.ndarray]]
    ) -> None:
        if not self._failed:
            self._queue.put(lambda w: w.write_step(step, mode, mode_step, tensors))

    def submit(self, job: _Job) -> None:
        """Run ``job(writer)`` on the writing thread, after the steps queued before it."""
        if not self._failed:
            self._queue.put(job)

    @property
    def failed(self) -> bool:
        return self._failed

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if self._failed:
                continue
            try:
                job(self._writer)
            except Exception as exc:
                self._failed = True
                sys.stderr.write(
                    f"trainops.debugger: saving tensors stopped ({type(exc).__name__}: {exc})\n"
                )
