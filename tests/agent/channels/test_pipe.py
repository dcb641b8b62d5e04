"""Pipe mode on file://: the FIFO contract (names, epochs, EOF, when the next FIFO appears, early
close, stop and SIGTERM while a reader waits), large pipes, and what ends up in the stream."""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tests.agent.channels._support import (
    GatedStore,
    Host,
    channel,
    open_fifo,
    read_epoch,
    read_some,
    wait_for_path,
    wait_until,
)
from trainops import StorageError
from trainops.agent.channels import PipeChannel, open_channel
from trainops.agent.channels._fifo import pipe_size


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """Five objects of different sizes and bytes, in two folders."""
    data = tmp_path / "dataset"
    (data / "b").mkdir(parents=True)
    for i, size in enumerate([0, 1, 4099, 70_000, 300_000]):
        folder = data if i % 2 else data / "b"
        (folder / f"obj-{i}").write_bytes(bytes([i + 1]) * size)
    return data


def _expected(data: Path) -> bytes:
    """One epoch without a seed: every object, in key order."""
    files = sorted((p for p in data.rglob("*") if p.is_file()), key=lambda p: p.relative_to(data))
    return b"".join(p.read_bytes() for p in files)


def _pipe(host: Host, uri: str, **fields: object) -> PipeChannel:
    source = open_channel(channel(uri, mode="Pipe", **fields), host.context())
    assert isinstance(source, PipeChannel)
    return source


def _is_fifo(path: Path) -> bool:
    return path.exists() and stat.S_ISFIFO(path.lstat().st_mode)


def test_one_fifo_per_epoch_each_with_every_object(host: Host, dataset: Path) -> None:
    source = _pipe(host, dataset.as_uri())
    source.prepare()
    try:
        assert sorted(p.name for p in host.data_dir.iterdir()) == ["train_0"]
        assert _is_fifo(host.data_dir / "train_0")
        for epoch in range(3):
            assert read_epoch(host.data_dir, "train", epoch) == _expected(dataset)
        wait_until(lambda: source.epochs_done == 3)
        assert [p.name for p in host.data_dir.iterdir()] == ["train_3"]  # served ones are gone
    finally:
        source.close()
    assert list(host.data_dir.iterdir()) == []
    assert any("epoch 2 done, 5 records" in line for line in host.lines)


def test_the_next_fifo_appears_once_the_reader_took_the_last_byte(
    host: Host, tmp_path: Path
) -> None:
    data = tmp_path / "big"
    data.mkdir()
    (data / "one").write_bytes(os.urandom(6 << 20))  # several pipe buffers
    source = _pipe(host, data.as_uri())
    source.prepare()
    try:
        fd = open_fifo(host.data_dir / "train_0")
        got = read_some(fd, 1 << 20)
        assert not (host.data_dir / "train_1").exists()
        while len(got) < 6 << 20:
            got += read_some(fd, 1 << 20)
            if len(got) < 6 << 20:
                assert not (host.data_dir / "train_1").exists()
        # All bytes taken: EOF comes only after the next epoch's FIFO is there.
        assert read_some(fd, 1 << 20) == b""
        assert _is_fifo(host.data_dir / "train_1")
        os.close(fd)
        assert got == (data / "one").read_bytes()
    finally:
        source.close()


def test_the_pipe_buffer_is_as_large_as_the_system_allows(host: Host, dataset: Path) -> None:
    source = _pipe(host, dataset.as_uri())
    source.prepare()
    try:
        fd = open_fifo(host.data_dir / "train_0")
        read_some(fd, 1)  # the writer is attached and has set the size
        assert fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) == pipe_size() >= 1 << 16
        os.close(fd)
    finally:
        source.close()


READER = textwrap.dedent(
    """
    import hashlib, os, sys, time
    data, epochs = sys.argv[1], int(sys.argv[2])
    for epoch in range(epochs):
        path = os.path.join(data, f"train_{epoch}")
        while not os.path.exists(path):  # as SageMaker's readers do: wait for it to appear
            time.sleep(0.01)
        digest = hashlib.sha256()
        with open(path, "rb") as fifo:
            while chunk := fifo.read(65536):
                digest.update(chunk)
        print(epoch, digest.hexdigest(), flush=True)
    """
)


def test_a_script_reads_several_epochs_from_its_fifos(host: Host, dataset: Path) -> None:
    source = _pipe(host, dataset.as_uri())
    source.prepare()
    try:
        done = subprocess.run(
            [sys.executable, "-c", READER, str(host.data_dir), "3"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        source.close()
    want = hashlib.sha256(_expected(dataset)).hexdigest()
    assert done.stdout.split() == ["0", want, "1", want, "2", want]


def test_a_reader_that_closes_early_gets_the_next_epoch_whole(host: Host, dataset: Path) -> None:
    source = _pipe(host, dataset.as_uri())
    source.prepare()
    try:
        fd = open_fifo(host.data_dir / "train_0")
        assert read_some(fd, 100)
        os.close(fd)  # SageMaker's contract: a reader may stop an epoch early
        assert read_epoch(host.data_dir, "train", 1) == _expected(dataset)
        assert any("closed train_0 early" in line for line in host.lines)
    finally:
        source.close()


def test_close_while_no_reader_ever_came(host: Host, dataset: Path) -> None:
    source = _pipe(host, dataset.as_uri())
    source.prepare()
    source.close()  # the writer waits in open(): it must end
    assert not (host.data_dir / "train_0").exists()


def test_close_while_the_pipe_is_full_and_the_reader_does_not_read(
    host: Host, tmp_path: Path
) -> None:
    data = tmp_path / "big"
    data.mkdir()
    (data / "one").write_bytes(b"z" * (8 << 20))
    source = _pipe(host, data.as_uri())
    source.prepare()
    fd = open_fifo(host.data_dir / "train_0")
    read_some(fd, 1)
    source.close()  # the writer waits for room that never comes: it must end
    rest = b""
    while chunk := read_some(fd, 1 << 20):
        rest += chunk
    os.close(fd)
    assert 0 < len(rest) < 8 << 20  # what was in the pipe, then EOF


def _gated(host: Host, tmp_path: Path) -> tuple[PipeChannel, GatedStore]:
    """A gzip channel whose storage does not answer until the gate opens."""
    import gzip

    data = tmp_path / "gz"
    data.mkdir()
    (data / "a.gz").write_bytes(gzip.compress(b"payload" * 1000))
    gate = GatedStore()
    host.stores["file"] = gate
    source = _pipe(host, data.as_uri(), compression="Gzip")
    source.prepare()
    return source, gate


def test_close_while_the_reader_waits_for_bytes(host: Host, tmp_path: Path) -> None:
    source, gate = _gated(host, tmp_path)
    fd = open_fifo(host.data_dir / "train_0")
    gate.waiting.wait(10)  # the writer is attached and waits on storage; the reader on it
    try:
        source.close()
        assert read_some(fd, 100) == b""  # the reader sees the end, not a hang
    finally:
        gate.gate.set()
        os.close(fd)


def test_sigterm_to_a_reader_that_waits_for_bytes(host: Host, tmp_path: Path) -> None:
    source, gate = _gated(host, tmp_path)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(host.data_dir), "1"])
    try:
        gate.waiting.wait(10)
        wait_for_path(host.data_dir / "train_0")
        reader.send_signal(signal.SIGTERM)
        assert reader.wait(30) == -signal.SIGTERM
        gate.gate.set()  # the writer finds the reader gone and serves the next epoch
        wait_for_path(host.data_dir / "train_1")
        assert read_epoch(host.data_dir, "train", 1) == b"payload" * 1000
    finally:
        gate.gate.set()
        reader.kill()
        reader.wait()
        source.close()
    assert source.failure is None


def test_close_from_another_thread_while_a_reader_reads(host: Host, tmp_path: Path) -> None:
    data = tmp_path / "big"
    data.mkdir()
    (data / "one").write_bytes(b"q" * (32 << 20))
    source = _pipe(host, data.as_uri())
    source.prepare()
    fd = open_fifo(host.data_dir / "train_0")
    got = [0]

    def drain() -> None:
        while chunk := read_some(fd, 1 << 16):
            got[0] += len(chunk)

    reading = threading.Thread(target=drain)
    reading.start()
    source.close()
    reading.join(30)
    os.close(fd)
    assert not reading.is_alive()
    assert got[0] <= 32 << 20


def test_a_fifo_name_taken_by_a_directory_is_a_clear_error(host: Host, dataset: Path) -> None:
    (host.data_dir / "train_0").mkdir(parents=True)  # a File channel named train_0, say
    source = _pipe_unprepared(host, dataset.as_uri())
    try:
        with pytest.raises(StorageError, match="train_0 is a directory"):
            source.prepare()
    finally:
        source.close()
    assert [p.name for p in host.data_dir.iterdir()] == ["train_0"]


def _pipe_unprepared(host: Host, uri: str) -> PipeChannel:
    source = open_channel(channel(uri, mode="Pipe"), host.context())
    assert isinstance(source, PipeChannel)
    return source
