"""Pipe mode: a channel streamed through one named FIFO per epoch, ``input/data/<name>_<epoch>``.

``prepare()`` lists the channel (or reads its manifest), creates ``<name>_0`` and starts one
writer thread; the script may start at once. The thread serves epochs until ``close()``:

1. It waits for a reader to open ``<name>_<e>`` (a blocking open: no delay once one comes).
2. It writes the host's share of epoch ``e`` (``_share``: ShuffleConfig's order, reseeded every
   epoch, and ShardedByKey's split) object after object (``_stream``).
3. It waits until the reader has taken the last byte, then creates ``<name>_<e+1>``, removes
   the name ``<name>_<e>`` and closes it. So the next FIFO appears exactly when the reader has
   consumed the epoch, and before its ``read`` returns EOF: a reader that opens the next FIFO on
   EOF finds it there. (SageMaker "creates the next FIFO in advance", without a guarantee; an
   earlier one would be a FIFO no one may ever read, a later one a race every reader must retry.)
4. A reader that closes an epoch early (allowed by SageMaker's contract) ends it: the writer goes
   on with the next epoch.

``close()`` (after the script ended, whatever happened) wakes the thread wherever it waits (for
a reader, for room in the pipe, for bytes from storage), joins it and removes the FIFOs; a
ranged read still in flight is left to end on its own and its bytes are dropped.

An error while streaming (an object gone or changed, a corrupt gzip object) ends the epoch's FIFO
early and serves no further epoch; it is logged at once and kept in :attr:`PipeChannel.failure`,
which fails the job once the script has ended.
"""

from __future__ import annotations

import contextlib
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainops._errors import StorageError
from trainops.agent.channels._base import Bind, ChannelContext, check_channel_name
from trainops.agent.channels._fifo import FifoWriter, ReaderGone, Stopped, Waker, make_fifo
from trainops.agent.channels._manifest import Piece, augmented_entries, manifest_objects
from trainops.agent.channels._share import share_of
from trainops.agent.channels._stream import EpochWriter, StreamOptions
from trainops.protocol import ChannelSpec

__all__ = ["PipeChannel"]

_JOIN_STEP_S = 0.05
MB = 1_000_000


class PipeChannel:
    """Pipe mode: one FIFO per epoch, served by a writer thread until the channel is closed."""

    def __init__(self, channel: ChannelSpec, context: ChannelContext) -> None:
        self.channel = channel
        self.failure: str | None = None  # why streaming stopped, if it failed
        self.epochs_done = 0  # epochs whose every byte reached the reader
        self._context = context
        self._entries: list[tuple[Piece, ...]] = []
        self._waker: Waker | None = None  # made by prepare(): the constructor does no I/O
        self._thread: threading.Thread | None = None
        self._writer: FifoWriter | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._epochs: EpochWriter | None = None
        self._closed = False

    def prepare(self) -> None:
        check_channel_name(self.channel.name)
        self._entries = self._load_entries()
        if self._context.stopping():
            return
        self._log_plan()
        options = _options(self.channel, self._context)
        self._waker = Waker()
        self._context.data_dir.mkdir(parents=True, exist_ok=True)
        self._pool = ThreadPoolExecutor(options.lanes, f"pipe-{self.channel.name}")
        self._epochs = EpochWriter(
            options, self._context.store_for, self._pool, self._context.scratch_dir, self._stopped
        )
        make_fifo(self.fifo_path(0))
        self._thread = threading.Thread(
            target=self._serve, name=f"pipe-{self.channel.name}", daemon=True
        )
        self._thread.start()

    def binds(self) -> tuple[Bind, ...]:
        return ()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._waker is not None:
            self._waker.set()
        while self._thread is not None and self._thread.is_alive():
            writer = self._writer
            if writer is not None:
                writer.release()
            self._thread.join(_JOIN_STEP_S)
        if self._pool is not None:
            # A ranged read already running ends by itself (storage has timeouts); waiting for
            # one that hangs would hold the job's end hostage to it.
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._waker is not None:
            self._waker.close()
        for path in self._context.data_dir.glob(f"{self.channel.name}_*"):
            if path.name.removeprefix(f"{self.channel.name}_").isdigit() and _is_fifo(path):
                path.unlink(missing_ok=True)

    def fifo_path(self, epoch: int) -> Path:
        return self._context.data_dir / f"{self.channel.name}_{epoch}"

    @property
    def peak_read_ahead(self) -> int:
        """The most bytes read ahead of the reader at once so far."""
        return 0 if self._epochs is None else self._epochs.peak_ahead

    @property
    def read_ahead_budget(self) -> int:
        """The bytes the read-ahead may hold (a quarter of ``transfer.memory``); one span
        larger than that is still read, alone."""
        return _options(self.channel, self._context).budget

    def _load_entries(self) -> list[tuple[Piece, ...]]:
        channel, store_for = self.channel, self._context.store_for
        if channel.uri is None:
            raise StorageError(f"channel {channel.name!r}: a Pipe channel needs a uri")
        if channel.s3_data_type == "ManifestFile":
            return [(info,) for info in manifest_objects(channel.uri, store_for)]
        if channel.s3_data_type == "AugmentedManifestFile":
            return augmented_entries(channel.uri, channel.attribute_names, store_for)
        found = store_for(channel.uri).list_objects(channel.uri)
        if not found:
            raise StorageError(f"channel {channel.name!r}: no objects found under {channel.uri}")
        return [(info,) for info in found]

    def _log_plan(self) -> None:
        share = self._share(0)
        what = "lines" if self.channel.s3_data_type == "AugmentedManifestFile" else "objects"
        self._context.log(
            f"Channel {self.channel.name!r} (Pipe): {len(share)} of {len(self._entries)} {what} "
            f"per epoch for {self._context.current_host}, from {self.fifo_path(0).name} on"
        )

    def _share(self, epoch: int) -> list[tuple[Piece, ...]]:
        return share_of(
            self._entries,
            self._context.hosts,
            self._context.current_host,
            self.channel.distribution,
            seed=self.channel.shuffle_seed,
            epoch=epoch,
        )

    def _stopped(self) -> bool:
        return self._waker is None or self._waker.is_set()

    def _serve(self) -> None:
        epoch = 0
        try:
            while True:
                self._serve_epoch(epoch)
                epoch += 1
        except Exception:  # stopped, or failed (the failure is kept and logged already)
            return

    def _serve_epoch(self, epoch: int) -> None:
        path = self.fifo_path(epoch)
        assert self._waker is not None
        writer = self._writer = FifoWriter(path, self._waker)
        try:
            writer.open()
            self._stream(epoch, writer)
            make_fifo(self.fifo_path(epoch + 1))
        except Stopped:
            raise
        except Exception as exc:
            # Kept before the FIFO closes: the reader's EOF may end the script at once.
            what = str(exc) if isinstance(exc, StorageError) else f"{type(exc).__name__}: {exc}"
            self.failure = f"Pipe channel {self.channel.name!r}, epoch {epoch}: {what}"
            self._context.log(f"ERROR: {self.failure}; no further epoch is served")
            raise
        finally:
            # The name goes before the write end closes: a reader that sees EOF finds the next
            # epoch's FIFO there and this one gone (an open FIFO outlives its name).
            path.unlink(missing_ok=True)
            writer.close()

    def _stream(self, epoch: int, writer: FifoWriter) -> None:
        assert self._epochs is not None
        pieces = [piece for entry in self._share(epoch) for piece in entry]
        started = time.monotonic()
        try:
            written = self._epochs.write(writer, pieces)
            writer.drain()
        except ReaderGone:
            self._context.log(
                f"Channel {self.channel.name!r}: the reader closed {writer.path.name} early"
            )
            return
        self.epochs_done += 1
        seconds = time.monotonic() - started
        self._context.log(
            f"Channel {self.channel.name!r}: epoch {epoch} done, {len(pieces)} records, "
            f"{written / MB:.1f} MB in {seconds:.1f} s"
        )


def _options(channel: ChannelSpec, context: ChannelContext) -> StreamOptions:
    transfer = context.settings.transfer
    return StreamOptions(
        gzip=channel.compression == "Gzip",
        recordio=channel.record_wrapping == "RecordIO",
        chunk=min(transfer.part_size, 8 << 20),
        budget=max(transfer.memory // 4, 1),
        lanes=transfer.concurrency,
    )


def _is_fifo(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return stat.S_ISFIFO(path.lstat().st_mode)
    return False
