"""Writing TensorBoard event files without TensorFlow.

An event file is a TFRecord stream of ``Event`` protobufs (``_proto``), the first one carrying
``file_version``. :class:`EventFileWriter` frames events into memory and appends them to the
file at most every ``flush_seconds`` (one ``write`` per flush, no fsync), so a scalar costs a few
microseconds. It rotates to a new file once the current one holds ``max_bytes`` or is
``rotate_seconds`` old, so a sync that re-uploads a growing file re-uploads at most that much;
TensorBoard reads the files of a directory in name order as one stream. Names are
``events.out.tfevents.<unix seconds>.<host>.<pid>.<n>`` (TensorFlow's), the seconds kept
increasing from one file of a writer to the next so that name order is writing order.

:class:`SummaryWriter` is the small API over it (scalars, histograms, HParams), for the agent,
the debugger's hook and scripts.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from trainops.data import tfrecord_frame
from trainops.tensorboard._histogram import histogram_of
from trainops.tensorboard._hparams import (
    HParam,
    SessionStatus,
    session_end_event,
    session_start_event,
)
from trainops.tensorboard._proto import (
    file_version_event,
    histogram_event,
    scalar_event,
    scalar_series,
)

__all__ = ["DIR_ENV", "EventFileWriter", "SummaryWriter", "event_file_name"]

#: Where the agent tells a script to write its event files (the job's TensorBoard local path).
DIR_ENV = "TRAINOPS_TENSORBOARD_DIR"
FILE_MARK = "tfevents"  # TensorBoard reads the files whose name contains it
_UIDS = itertools.count()  # per process, as TensorFlow's global uid


def event_file_name(seconds: int, host: str, pid: int, number: int, suffix: str = "") -> str:
    host = host.replace("/", "_") or "localhost"
    return f"events.out.{FILE_MARK}.{seconds:010d}.{host}.{pid}.{number}{suffix}"


class EventFileWriter:
    """Appends framed events to event files in ``logdir``; thread-safe.

    ``host`` goes into file names (default: this machine's name), ``filename_suffix`` at their
    end; ``file_name`` names the first file instead (``<file_name>.<n>`` the later ones, which
    sort after it). Nothing is on disk before the first :meth:`flush` (or the first automatic
    one).
    """

    def __init__(
        self,
        logdir: str | os.PathLike[str],
        *,
        host: str | None = None,
        flush_seconds: float = 1.0,
        max_bytes: int = 1 << 20,
        rotate_seconds: float = 600.0,
        filename_suffix: str = "",
        file_name: str | None = None,
    ) -> None:
        if file_name is not None and (FILE_MARK not in file_name or "/" in file_name):
            raise ValueError(f"an event file's name holds {FILE_MARK!r} and no '/': {file_name!r}")
        if max_bytes <= 0 or flush_seconds < 0 or rotate_seconds <= 0:
            raise ValueError("max_bytes and rotate_seconds must be positive, flush_seconds >= 0")
        self.logdir = Path(logdir)
        self.host = host or socket.gethostname()
        self.flush_seconds = flush_seconds
        self.max_bytes = max_bytes
        self.rotate_seconds = rotate_seconds
        self.suffix = filename_suffix
        self.file_name = file_name
        self.files: list[Path] = []
        self._lock = threading.Lock()
        self._pending = bytearray()
        self._fd: int | None = None
        self._size = 0
        self._opened = 0.0
        self._last_seconds = 0
        self._last_flush = time.monotonic()
        self._closed = False
        self._whole: dict[Path, tuple[int, int, int]] = {}

    def add_event(self, payload: bytes) -> None:
        """Queue one serialized ``Event``; written at the next flush (automatic when due)."""
        frame = tfrecord_frame(payload)
        with self._lock:
            if self._closed:
                raise ValueError(f"event writer for {self.logdir} is closed")
            self._pending += frame
            if time.monotonic() - self._last_flush >= self.flush_seconds:
                self._flush_locked()

    def add_events(self, payloads: Iterable[bytes]) -> None:
        """:meth:`add_event` for each of ``payloads``, framed and queued at once."""
        frames = b"".join(map(tfrecord_frame, payloads))
        with self._lock:
            if self._closed:
                raise ValueError(f"event writer for {self.logdir} is closed")
            self._pending += frames
            if time.monotonic() - self._last_flush >= self.flush_seconds:
                self._flush_locked()

    def flush(self) -> None:
        """Append everything queued to the current file (opening or rotating it as due)."""
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def close(self) -> None:
        """Flush and close; later events are refused."""
        with self._lock:
            if self._closed:
                return
            try:
                self._flush_locked()
            finally:
                self._closed = True
                self._close_file()

    def whole_files(self) -> dict[Path, tuple[int, int, int]]:
        """Each file written so far, as this writer left it: ``(size, mtime_ns, inode)`` after
        its last write, all whole records (a flush writes whole records only)."""
        with self._lock:
            return dict(self._whole)

    @property
    def path(self) -> Path | None:
        """The file being appended to (None before the first flush)."""
        return self.files[-1] if self.files and self._fd is not None else None

    def _flush_locked(self) -> None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        if self._fd is not None and self._due_for_rotation():
            self._close_file()
        if self._fd is None:
            self._open_file()
        data, self._pending = bytes(self._pending), bytearray()
        assert self._fd is not None
        _write_all(self._fd, data)
        self._size += len(data)
        stat = os.fstat(self._fd)
        self._whole[self.files[-1]] = (stat.st_size, stat.st_mtime_ns, stat.st_ino)

    def _due_for_rotation(self) -> bool:
        aged = time.monotonic() - self._opened >= self.rotate_seconds
        return self._size >= self.max_bytes or aged

    def _open_file(self) -> None:
        self.logdir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        seconds = max(int(now), self._last_seconds + 1 if self.files else 0)
        self._last_seconds = seconds
        name = event_file_name(seconds, self.host, os.getpid(), next(_UIDS), self.suffix)
        if self.file_name is not None:
            name = f"{self.file_name}.{len(self.files)}" if self.files else self.file_name
        path = self.logdir / name
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self.files.append(path)
        self._opened = time.monotonic()
        head = tfrecord_frame(file_version_event(now))
        _write_all(self._fd, head)
        self._size = len(head)

    def _close_file(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class SummaryWriter:
    """Scalars, histograms and HParams into TensorBoard event files, like
    ``torch.utils.tensorboard.SummaryWriter``: ``SummaryWriter(log_dir).add_scalar("loss", 0.3,
    step)``, :meth:`add_histogram`, :meth:`add_session_start` and :meth:`add_session_end`.

    ``log_dir`` defaults to the job's TensorBoard path (``TRAINOPS_TENSORBOARD_DIR``, set by the
    agent when the job has a ``tensorboard_output_config``), else ``runs``. Also a context
    manager (closed on exit).
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        *,
        flush_secs: float = 1.0,
        max_bytes: int = 1 << 20,
        rotate_seconds: float = 600.0,
        filename_suffix: str = "",
        host: str | None = None,
        file_name: str | None = None,
    ) -> None:
        directory = log_dir if log_dir is not None else os.environ.get(DIR_ENV) or "runs"
        self.file_writer = EventFileWriter(
            directory,
            host=host,
            flush_seconds=flush_secs,
            max_bytes=max_bytes,
            rotate_seconds=rotate_seconds,
            filename_suffix=filename_suffix,
            file_name=file_name,
        )

    @property
    def log_dir(self) -> Path:
        return self.file_writer.logdir

    def add_scalar(
        self, tag: str, value: float, step: int = 0, wall_time: float | None = None
    ) -> None:
        """Record ``tag`` = ``value`` (stored as float32) at ``step``; ``wall_time`` defaults to
        now (Unix seconds)."""
        when = time.time() if wall_time is None else float(wall_time)
        self.file_writer.add_event(scalar_event(tag, float(value), int(step), when))

    def add_scalars(
        self, tag: str, values: Sequence[float], first_step: int, wall_time: float
    ) -> None:
        """:meth:`add_scalar` for each of ``values``, at ``first_step``, ``first_step + 1``, ...,
        all at ``wall_time``: the metric path's batch, a third of the cost of one call a point."""
        if len(values) == 1:  # a template is not worth making for one point
            self.add_scalar(tag, values[0], first_step, wall_time)
            return
        floats = [float(value) for value in values]
        self.file_writer.add_events(scalar_series(tag, floats, int(first_step), float(wall_time)))

    def add_histogram(
        self, tag: str, values: Any, step: int = 0, wall_time: float | None = None
    ) -> bool:
        """Record the histogram of ``values`` (an array, a CPU tensor, a list of numbers) at
        ``step``, over TensorFlow's default buckets; TensorBoard's histogram and distribution
        dashboards show it. Values that are not finite are left out; returns False (nothing
        written) when none is finite."""
        histogram = histogram_of(values)
        if histogram is None:
            return False
        when = time.time() if wall_time is None else float(wall_time)
        self.file_writer.add_event(histogram_event(tag, histogram.encode(), int(step), when))
        return True

    def add_session_start(
        self,
        hparams: Mapping[str, HParam],
        group_name: str = "",
        start_time: float | None = None,
    ) -> None:
        """Start an HParams session in this run: its hyperparameters (a string that reads as a
        number is shown as one); the run's scalars are its metrics."""
        when = time.time() if start_time is None else float(start_time)
        self.file_writer.add_event(session_start_event(hparams, group_name, when))

    def add_session_end(
        self, status: SessionStatus = SessionStatus.SUCCESS, end_time: float | None = None
    ) -> None:
        """End the run's HParams session with ``status``."""
        when = time.time() if end_time is None else float(end_time)
        self.file_writer.add_event(session_end_event(status, when))

    def flush(self) -> None:
        self.file_writer.flush()

    def close(self) -> None:
        self.file_writer.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
