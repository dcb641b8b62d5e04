"""Batches from a DataLoader worker to the training process through shared memory.

A worker that pickles a :class:`RecordBatch` for the DataLoader's queue copies the records into
its ring, a ``memfd`` (anonymous shared memory, so no file to leak and no ``/dev/shm`` size
limit) mapped by the worker, and pickles only where they are: the worker's pid and the ring's
descriptor, a token, and the offsets. The training process maps the same memory once per
worker (through ``/proc/<pid>/fd/<fd>``, while the worker is alive: DataLoader workers live until
the loader shuts them down) and hands out the records as read-only ``memoryview`` slices of it:
no pickling of the bytes, no copy through the pipe, no copy out.

The ring is reused in order. Each batch holds its span until the batch and every record view
taken from it are gone (a finalizer on the one object their views share); the training process
then writes how far the ring is free into the ring's header, where the worker reads it before
writing more. When the ring has no room (the loop keeps many batches, or one batch is larger
than a quarter of the ring) the batch travels the ordinary way, pickled as bytes: nothing waits.
``TRAINOPS_DATA_SHM=0`` in the environment turns the ring off (every batch pickled), for a system
where one process may not open another's descriptors through ``/proc``.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import sys
import threading
import weakref
from array import array
from collections.abc import Sequence
from typing import Any

__all__ = ["receive", "worker_ring"]

_HEADER = 4096  # released (u64), its complement (u64), token (16 bytes); data after a page
_RELEASED = struct.Struct("<QQ")
_MIN_RING, _MAX_RING = 16 << 20, 256 << 20
_ALL_ONES = 0xFFFFFFFFFFFFFFFF


class Ring:
    """The worker's side: ``capacity`` bytes of data after the header, written in order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.pid = os.getpid()
        self.token = os.urandom(16)
        self.fd = os.memfd_create("trainops-batches", os.MFD_CLOEXEC)
        try:
            os.posix_fallocate(self.fd, 0, _HEADER + capacity)  # no SIGBUS later for want of room
            self.map = mmap.mmap(self.fd, _HEADER + capacity)
        except OSError:
            os.close(self.fd)
            raise
        _RELEASED.pack_into(self.map, 0, 0, _ALL_ONES)
        self.map[16:32] = self.token
        self.head = 0
        self.lock = threading.Lock()

    def write(
        self, records: Sequence[memoryview | bytes], size: int
    ) -> tuple[int, int, int] | None:
        """Copy ``records`` (``size`` bytes) in; ``(data offset, span start, span end)`` or None
        when there is no room."""
        with self.lock:
            at = self.head % self.capacity
            skip = self.capacity - at if at + size > self.capacity else 0
            start, end = self.head, self.head + skip + size
            if size > self.capacity // 4 or end - _released(self.map) > self.capacity:
                return None
            self.head = end
        offset = _HEADER + (at + skip) % self.capacity
        for record in records:
            self.map[offset : offset + len(record)] = record
            offset += len(record)
        return _HEADER + (at + skip) % self.capacity, start, end


def _released(view: mmap.mmap) -> int:
    while True:  # the reader writes both words; a torn read shows as a mismatch
        value, check = _RELEASED.unpack_from(view, 0)
        if value ^ check == _ALL_ONES:
            return int(value)


_ring: Ring | None = None
_ring_failed = False


def worker_ring(size: int) -> Ring | None:
    """This DataLoader worker's ring (made for batches of about ``size`` bytes), or None outside
    a worker or where shared memory cannot be had."""
    global _ring, _ring_failed
    if _ring is not None and _ring.pid != os.getpid():
        _ring, _ring_failed = None, False  # a forked child's copy: the ring is its parent's
    if _ring is not None or _ring_failed:
        return _ring
    if not _in_worker() or os.environ.get("TRAINOPS_DATA_SHM") == "0":
        return None
    capacity = min(_MAX_RING, max(_MIN_RING, -(-8 * size // (1 << 20)) << 20))
    try:
        _ring = Ring(capacity)
    except (OSError, AttributeError):  # no memfd (not Linux) or no memory for it
        _ring_failed = True
    return _ring


def _in_worker() -> bool:
    if "torch.utils.data" not in sys.modules:
        return False
    from torch.utils.data import get_worker_info

    return get_worker_info() is not None


class _View:
    """The training process's mapping of one worker's ring, and what of it is free again."""

    def __init__(self, pid: int, fd: int, token: bytes, capacity: int) -> None:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            handle = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            raise RuntimeError(
                f"cannot read DataLoader worker {pid}'s batches from shared memory ({path}: "
                f"{error.strerror}); set TRAINOPS_DATA_SHM=0 to send them pickled"
            ) from None
        try:
            self.map = mmap.mmap(handle, _HEADER + capacity)
        finally:
            os.close(handle)
        if self.map[16:32] != token:
            raise RuntimeError(f"{path}: not the ring of that worker")
        self.released = 0
        self.pending: dict[int, int] = {}
        self.lock = threading.Lock()

    def release(self, start: int, end: int) -> None:
        with self.lock:
            self.pending[start] = end
            while self.released in self.pending:
                self.released = self.pending.pop(self.released)
            _RELEASED.pack_into(self.map, 0, self.released, self.released ^ _ALL_ONES)


_views: dict[tuple[int, bytes], _View] = {}


def _view(pid: int, fd: int, token: bytes, capacity: int) -> _View:
    found = _views.get((pid, token))
    if found is None:
        for key in [k for k in _views if not os.path.exists(f"/proc/{k[0]}")]:
            del _views[key]  # that worker is gone; its batches keep their mapping alive
        found = _views[(pid, token)] = _View(pid, fd, token, capacity)
    return found


def receive(
    where: tuple[int, int, bytes, int], span: tuple[int, int, int], bounds: bytes
) -> list[memoryview]:
    """The records of a batch a worker wrote at ``span`` (data offset, start, end) of its ring."""
    view = _view(*where)
    offsets = array("Q")
    offsets.frombytes(bounds)
    at, start, end = span
    size = offsets[-1]
    exporter: Any = (ctypes.c_char * size).from_buffer(view.map, at)
    # Every record view shares this one exporter: the span is free once none of them is left.
    weakref.finalize(exporter, view.release, start, end)
    data = memoryview(exporter).cast("B").toreadonly()
    return [data[offsets[k] : offsets[k + 1]] for k in range(len(offsets) - 1)]
