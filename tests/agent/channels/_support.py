"""What the channel tests share: a channel as a validated spec gives it, a host's context on real
directories, a FIFO reader with deadlines, and a file:// store whose reads wait at a gate."""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops._settings import Settings
from trainops.agent.channels import ChannelContext
from trainops.protocol import ChannelSpec
from trainops.spec import JobSpec
from trainops.storage import ObjectStore, store_for
from trainops.storage._file import FileStore

MAGIC = 0xCED7230A


def channel(uri: str, name: str = "train", **fields: Any) -> ChannelSpec:
    """The channel ``name`` as a validated job spec hands it to the agent."""
    spec = JobSpec(entry_point="train.py", inputs={name: {"uri": uri, **fields}})
    return spec.view().inputs[0]


@dataclass
class Host:
    """One host's input/data and scratch directories, and what its channels logged."""

    root: Path
    settings: Settings
    hosts: Sequence[str] = ("algo-1",)
    current_host: str = "algo-1"
    stop: threading.Event = field(default_factory=threading.Event)
    lines: list[str] = field(default_factory=list)
    stores: dict[str, ObjectStore] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return self.root / self.current_host / "input" / "data"

    def context(self) -> ChannelContext:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        scratch = self.root / self.current_host / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        return ChannelContext(
            data_dir=self.data_dir,
            scratch_dir=scratch,
            hosts=list(self.hosts),
            current_host=self.current_host,
            store_for=self.store_for,
            settings=self.settings,
            log=self.lines.append,
            stopping=self.stop.is_set,
        )

    def store_for(self, uri: str) -> ObjectStore:
        scheme = uri.partition("://")[0]
        if scheme not in self.stores:
            self.stores[scheme] = store_for(uri, self.settings)
        return self.stores[scheme]


class GatedStore(FileStore):
    """The real file:// store, except that ranged reads wait until :attr:`gate` is set: a
    stand-in for storage that is slow to answer, so a reader waits with nothing to read."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def _get_range(self, uri: str, start: int, end: int) -> bytes:
        self.waiting.set()
        self.gate.wait(30)
        return super()._get_range(uri, start, end)


def wait_for_path(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.005)


def open_fifo(path: Path, timeout: float = 10.0) -> int:
    """Open a FIFO for reading once it exists (non-blocking: reads poll with deadlines)."""
    wait_for_path(path, timeout)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def read_some(fd: int, size: int, timeout: float = 10.0) -> bytes:
    """Up to ``size`` bytes as soon as some are there (``b""`` at EOF)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if not poller.poll(timeout * 1000):
        raise AssertionError(f"nothing to read within {timeout} s")
    try:
        return os.read(fd, size)
    except BlockingIOError:
        return read_some(fd, size, timeout)


def chunks_until_eof(fd: int, size: int = 1 << 20, timeout: float = 10.0) -> Iterator[bytes]:
    while chunk := read_some(fd, size, timeout):
        yield chunk


def read_epoch(data_dir: Path, name: str, epoch: int, timeout: float = 10.0) -> bytes:
    """Everything the FIFO ``<name>_<epoch>`` gives until EOF."""
    fd = open_fifo(data_dir / f"{name}_{epoch}", timeout)
    try:
        return b"".join(chunks_until_eof(fd, timeout=timeout))
    finally:
        os.close(fd)


def recordio_records(stream: bytes) -> list[bytes]:
    """The payloads of a stream of whole (flag 0) RecordIO records, checking the framing."""
    out, at = [], 0
    while at < len(stream):
        magic = int.from_bytes(stream[at : at + 4], "little")
        word = int.from_bytes(stream[at + 4 : at + 8], "little")
        assert magic == MAGIC, f"bad magic at byte {at}"
        assert word >> 29 == 0, f"a record at byte {at} is split"
        length = word & ((1 << 29) - 1)
        out.append(stream[at + 8 : at + 8 + length])
        at += 8 + length + (-length % 4)
    assert at == len(stream)
    return out


def threads_now() -> set[threading.Thread]:
    return set(threading.enumerate())


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)
