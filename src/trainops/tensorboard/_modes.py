"""The debugger hook's TensorBoard layout, as smdebug writes it: a run per mode, a file per step.

smdebug's hook (``export_tensorboard``/``tensorboard_dir``) writes each saved step's summaries
into ``<tb>/<MODE>/<step:012d>_<worker>.tfevents`` (``core/locations.py``'s
``TensorboardFileLocation``), the mode's name (``TRAIN``, ``EVAL``, ``PREDICT``, ``GLOBAL``) being
a TensorBoard run, the worker ``<pid>_<host>``, and closes the step's files when the step ends.
Histogram tags are ``<collection>/<tensor>``; scalars (losses, reductions) use the tensor's name.
:class:`StepSummaries` keeps that layout over :class:`SummaryWriter`.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any

from trainops.tensorboard._writer import SummaryWriter

__all__ = ["MODE_NAMES", "StepSummaries", "tensorboard_worker"]

MODE_NAMES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def tensorboard_worker() -> str:
    """smdebug's ``get_tb_worker()``: ``<pid>_<host>``."""
    return f"{os.getpid()}_{socket.gethostname()}"


class StepSummaries:
    """Summaries of the saved steps under ``tb_dir`` in smdebug's layout; not thread-safe (the
    hook calls it from its step boundary). Call :meth:`end_step` when a step's summaries are all
    given (it closes the step's files, as smdebug does), :meth:`close` at the end."""

    def __init__(self, tb_dir: str | os.PathLike[str], worker: str | None = None) -> None:
        self.tb_dir = Path(tb_dir)
        self.worker = _UNSAFE.sub("_", worker or tensorboard_worker())
        self._writers: dict[str, SummaryWriter] = {}

    def add_scalar(self, mode: str, step: int, tag: str, value: float) -> None:
        self._writer(mode, step).add_scalar(tag, value, step)

    def add_histogram(self, mode: str, step: int, tag: str, values: Any) -> bool:
        """See :meth:`SummaryWriter.add_histogram`."""
        return self._writer(mode, step).add_histogram(tag, values, step)

    def end_step(self) -> None:
        """Close the open files (a later step starts its own)."""
        writers, self._writers = self._writers, {}
        for writer in writers.values():
            writer.close()

    close = end_step

    def _writer(self, mode: str, step: int) -> SummaryWriter:
        if mode not in MODE_NAMES:
            raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODE_NAMES)}")
        writer = self._writers.get(mode)
        if writer is None:
            writer = SummaryWriter(
                self.tb_dir / mode,
                file_name=f"{int(step):012d}_{self.worker}.tfevents",
                flush_secs=3600.0,  # written once, when the step ends
            )
            self._writers[mode] = writer
        return writer
