"""Steps written off the training thread: a bounded queue in front of one ``TensorFileWriter``,
and :class:`StepOutput`, which decides whether this process writes at all.

With a TensorBoard directory, the same thread also writes each step's summaries (histograms,
computed there, and scalars) in smdebug's layout (:class:`trainops.tensorboard.StepSummaries`:
``<tb>/<MODE>/<step>_<pid>_<host>.tfevents``), after the step's tensors.

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
from typing import Any

import numpy as np

from trainops.debugger.config import CollectionManager
from trainops.debugger.format import TensorFileWriter, mark_training_end
from trainops.debugger.hook._capture import Summaries
from trainops.debugger.hook._workers import CHIEF, num_workers, worker_name
from trainops.debugger.modes import ModeKeys

__all__ = ["QUEUE_STEPS", "StepOutput", "StepWriter"]

QUEUE_STEPS = 4

_Job = Callable[[TensorFileWriter], None]


class StepWriter:
    """Writes steps of one worker under ``out_dir`` on a background thread."""

    def __init__(self, out_dir: str, worker: str, tensorboard_dir: str | None = None) -> None:
        self.worker = worker
        self._writer = TensorFileWriter(out_dir, worker)
        self._summaries: Any = None
        if tensorboard_dir is not None:
            from trainops.tensorboard import StepSummaries

            self._summaries = StepSummaries(tensorboard_dir)
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=QUEUE_STEPS)
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="trainops-debugger", daemon=True)
        self._thread.start()

    def write_step(
        self,
        step: int,
        mode: int,
        mode_step: int,
        tensors: Sequence[tuple[str, np.ndarray]],
        summaries: Summaries | None = None,
    ) -> None:
        if self._failed:
            return
        if tensors:
            self._queue.put(lambda w: w.write_step(step, mode, mode_step, tensors))
        if summaries and self._summaries is not None:
            self._queue.put(lambda _: self._summarize(step, ModeKeys(mode).name, summaries))

    def _summarize(self, step: int, mode: str, summaries: Summaries) -> None:
        """Write one step's summaries (on the writing thread) and close its files; a failure
        stops the TensorBoard export only, with one line on stderr (tensors go on)."""
        out = self._summaries
        if out is None:
            return
        try:
            for tag, value in summaries.scalars:
                out.add_scalar(mode, step, tag, value)
            for tag, array in summaries.histograms:
                out.add_histogram(mode, step, tag, array)
            out.end_step()
        except Exception as exc:
            self._summaries = None
            sys.stderr.write(
                f"trainops.debugger: TensorBoard export stopped ({type(exc).__name__}: {exc})\n"
            )

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


class StepOutput:
    """A hook's output: the worker's :class:`StepWriter`, made at the first step written (when
    ``torch.distributed`` says which rank this is); with ``include_workers="one"`` only the chief
    writes. The collections file is written then and at :meth:`close`, which also marks the end
    of training (the chief's)."""

    def __init__(
        self,
        torch: Any,
        out_dir: str,
        dry_run: bool,
        include_workers: str,
        manager: CollectionManager,
        tensorboard_dir: str | None = None,
    ) -> None:
        self._torch, self.out_dir, self._manager = torch, out_dir, manager
        self.tensorboard_dir = tensorboard_dir
        self._dry_run, self._include_workers = dry_run, include_workers
        self._writer: StepWriter | None = None
        self._writes: bool | None = None

    def write_step(
        self,
        step: int,
        mode: ModeKeys,
        mode_step: int,
        tensors: Sequence[tuple[str, np.ndarray]],
        summaries: Summaries | None = None,
    ) -> None:
        if self._writes is None:
            worker = worker_name(self._torch)
            self._writes = not self._dry_run and (self._include_workers == "all" or worker == CHIEF)
            if self._writes:
                self._writer = StepWriter(self.out_dir, worker, self.tensorboard_dir)
                self._write_collections(self._writer)
        if self._writer is not None:
            self._writer.write_step(step, int(mode), mode_step, tensors, summaries)

    def _write_collections(self, writer: StepWriter) -> None:
        """Queue a snapshot of the collections (the hook goes on changing them)."""
        workers = num_workers(self._torch) if self._include_workers == "all" else 1
        snapshot = CollectionManager.from_dict(self._manager.to_json_dict())
        writer.submit(lambda w: w.write_collections(snapshot, workers))

    def close(self) -> None:
        writer = self._writer
        if writer is None:
            return
        self._write_collections(writer)
        writer.close()
        if writer.worker == CHIEF and not writer.failed:
            mark_training_end(self.out_dir)
