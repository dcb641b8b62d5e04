""":class:`StreamingDataset`: packed shards streamed into a PyTorch training loop.

The shards (``trainops pack --format shards``) are found in a local folder (a File or FastFile
channel), at an object-store URI (fetched ahead into a bounded cache), or on a Pipe channel's
FIFO (:meth:`StreamingDataset.from_channel`). Every epoch the dataset shows each rank its own
run of records (equal counts, as ``DistributedSampler``), shuffled by shard order and by windows
of records, deterministically in ``(seed, epoch)``; DataLoader workers take turns by batch so
the loop sees the rank's sequence in order. With ``batch_size`` the dataset makes the batches,
so each crosses the worker boundary as one message (a :class:`RecordBatch`), not one per
record. ``state_dict`` is a handful of numbers and
``load_state_dict`` continues mid-epoch without replaying what was read.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops._registry import Registry
from trainops.data._torch import iterable_base
from trainops.data.pipe._channel import PipeChannel, channel_entry, pipe_root
from trainops.data.shards._index import ShardIndex
from trainops.data.shards._local import LocalShards
from trainops.data.shards._source import ShardSource
from trainops.data.streaming._batch import RecordBatch
from trainops.data.streaming._indexed_epoch import EpochPlan, read_units
from trainops.data.streaming._partition import Placement
from trainops.data.streaming._pipe_epoch import Shuffle, pipe_units
from trainops.data.streaming._shuffle import default_window
from trainops.data.streaming._state import StreamState

if TYPE_CHECKING:
    from trainops.data.streaming._loader import StreamingLoader

    _Base = object
else:
    _Base = iterable_base()

__all__ = ["StreamingDataset"]

Item = RecordBatch | bytes
# By default a window holds this much data (262,144 records at most): for a folder or the cache
# of an object store it is what the shards under a window take (mapped, not read into memory).
INDEXED_WINDOW_BYTES = 1 << 30


class StreamingDataset(_Base):
    """An iterable over packed shards; see docs/data-streaming.md for every option."""

    def __init__(
        self,
        source: str | os.PathLike[str] | PipeChannel,
        *,
        batch_size: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        shuffle_window: int | None = None,
        drop_last: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_limit: int = 8 << 30,
        prefetch: int = 4,
        verify: bool = False,
        max_shard_bytes: int = 1 << 30,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be 1 or more (or None), not {batch_size}")
        self.batch_size = batch_size
        self.shuffle = shuffle
        if shuffle_window is not None and shuffle_window < 1:
            raise ValueError(f"shuffle_window must be 1 or more (or None), not {shuffle_window}")
        self.shuffle_window = shuffle_window
        self.drop_last = drop_last
        self.max_shard_bytes = max_shard_bytes
        self.source = _open_source(source, cache_dir, cache_limit, prefetch, verify)
        self.state = StreamState(seed=seed)

    @classmethod
    def from_channel(
        cls, channel: str, *, config_dir: str | os.PathLike[str] | None = None, **options: Any
    ) -> StreamingDataset:
        """The shards of SageMaker channel ``channel``: its folder in File or FastFile mode,
        its FIFOs in Pipe mode (``inputdataconfig.json`` says which)."""
        entry = channel_entry(channel, config_dir)
        if str(entry.get("TrainingInputMode", "File")).lower() == "pipe":
            timeout = options.pop("timeout", 120.0)
            pipe = PipeChannel.find(channel, config_dir=config_dir, timeout=timeout)
            return cls(pipe, **options)
        folder = os.environ.get(f"SM_CHANNEL_{channel.upper()}") or pipe_root(channel) / channel
        return cls(folder, **options)

    @property
    def epoch(self) -> int:
        return self.state.epoch

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its beginning at the next iteration."""
        self.state = self.state.moved(epoch=epoch, consumed=0)

    def __len__(self) -> int:
        """Batches (or records, without ``batch_size``) in one epoch of this rank."""
        if isinstance(self.source, PipeChannel):
            raise TypeError("a Pipe channel's length is only known at the end of its epoch")
        length = self._plan(Placement.detect()).length
        return -(-length // self.batch_size) if self.batch_size else length

    def __iter__(self) -> Iterator[Item]:
        place = Placement.detect()
        state = self.state
        # The position moves before each yield: the caller holds what it was given when it
        # asks for the state, whether or not it asks for more.
        for stop, records in self._units(place, state):
            if self.batch_size is not None:
                self.state = state.moved(consumed=stop)
                yield RecordBatch(records, epoch=state.epoch, stop=stop)
                continue
            for at, record in enumerate(records, start=stop - len(records) + 1):
                self.state = state.moved(consumed=at)
                yield bytes(record)
        if place.workers == 1:
            self.state = state.moved(epoch=state.epoch + 1, consumed=0)

    def state_dict(self) -> dict[str, Any]:
        """Where this rank is: epoch, records consumed in it, seed and what they apply to."""
        return self.state.as_dict(self._identity())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue where ``state`` (from :meth:`state_dict`) left off, at the next iteration."""
        self.state = StreamState.load(state, self._identity())

    def loader(self, **options: Any) -> StreamingLoader:
        """A torch DataLoader over this dataset (batches as they are), tracking the position."""
        from trainops.data.streaming._loader import StreamingLoader

        return StreamingLoader(self, **options)

    def note_progress(self, batch: RecordBatch) -> None:
        """Record that the training loop has taken ``batch`` (done by :meth:`loader`)."""
        self.state = self.state.moved(epoch=batch.epoch, consumed=batch.stop)

    def _units(
        self, place: Placement, state: StreamState
    ) -> Iterator[tuple[int, list[memoryview]]]:
        unit = self.batch_size or 1
        if isinstance(self.source, PipeChannel):
            _check_single_reader(self.source, place)
            key = (state.seed, state.epoch, place.rank, "records")
            shuffle = Shuffle(key, self.shuffle, self.shuffle_window)
            limit = self.max_shard_bytes
            yield from pipe_units(
                self.source, shuffle, start=state.consumed, unit=unit, max_shard_bytes=limit
            )
            return
        plan = self._plan(place, state)
        try:
            yield from read_units(self.source, plan, place, start=state.consumed, unit=unit)
        finally:
            self.source.close()

    def _plan(self, place: Placement, state: StreamState | None = None) -> EpochPlan:
        assert isinstance(self.source, ShardSource)
        state = state or self.state
        return EpochPlan(
            self.source.index,
            place,
            seed=state.seed,
            epoch=state.epoch,
            shuffle=self.shuffle,
            window=self.shuffle_window or _indexed_window(self.source.index),
            drop_last=self.drop_last,
        )

    def _identity(self) -> dict[str, Any]:
        place = Placement.detect()
        data = (
            f"pipe:{self.source.name}"
            if isinstance(self.source, PipeChannel)
            else self.source.fingerprint()
        )
        return {
            "dataset": data,
            "world_size": place.world,
            "shuffle": self.shuffle,
            "shuffle_window": self.shuffle_window,
            "drop_last": self.drop_last,
        }


def _indexed_window(index: ShardIndex) -> int:
    size = sum(shard.bytes for shard in index.shards)
    return default_window(size / max(index.total_records, 1), INDEXED_WINDOW_BYTES)


def _check_single_reader(channel: PipeChannel, place: Placement) -> None:
    if place.workers > 1:
        raise ValueError(
            f"channel {channel.name!r} is a Pipe channel: one process reads its FIFO, so use "
            f"a DataLoader with num_workers 0 or 1 (not {place.workers})"
        )
    local = os.environ.get("LOCAL_WORLD_SIZE", "1")
    if local != "1":
        raise ValueError(
            f"channel {channel.name!r} is a Pipe channel: one FIFO per host, read by one "
            f"process, but LOCAL_WORLD_SIZE={local} processes run here (use a File or "
            "FastFile channel, or an s3:// URI, to read from several)"
        )


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a :class:`StreamingDataset` passes on to the source it opens."""

    cache_dir: str | os.PathLike[str] | None
    cache_limit: int
    prefetch: int
    verify: bool


#: Opens the shards at a location (a path, or the rest of a URI after ``scheme://``).
ShardSourceOpener = Callable[[str, str, SourceOptions], ShardSource]

#: URI scheme -> how to open a dataset there (a plain path is ``file``).
SHARD_SOURCES: Registry[ShardSourceOpener] = Registry("shard source scheme", error=ValueError)


@SHARD_SOURCES.register("file")
def _local(uri: str, path: str, options: SourceOptions) -> ShardSource:
    del uri
    return LocalShards(path, verify=options.verify)


@SHARD_SOURCES.register("s3")
def _remote(uri: str, path: str, options: SourceOptions) -> ShardSource:
    del path
    # Imported here: a folder dataset never needs an object-store client.
    from trainops.data.shards._cache import ShardCache
    from trainops.data.shards._remote import RemoteShards

    folder = Path(options.cache_dir) if options.cache_dir else _default_cache(uri)
    return RemoteShards(
        uri, cache=ShardCache(folder, options.cache_limit), prefetch=options.prefetch
    )


def _open_source(
    source: str | os.PathLike[str] | PipeChannel,
    cache_dir: str | os.PathLike[str] | None,
    cache_limit: int,
    prefetch: int,
    verify: bool,
) -> ShardSource | PipeChannel:
    if isinstance(source, PipeChannel):
        return source
    text = os.fspath(source)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "file", text
    opener = SHARD_SOURCES.lookup(scheme, where=f"{text!r}: ")
    return opener(text, rest, SourceOptions(cache_dir, cache_limit, prefetch, verify))


def _default_cache(uri: str) -> Path:
    digest = hashlib.sha256(uri.rstrip("/").encode()).hexdigest()[:16]
    # One level under the temporary folder, checked to be ours before use (ShardCache.prepare):
    # a parent folder in a shared /tmp could be swapped by another user.
    return Path(tempfile.gettempdir()) / f"trainops-shards-{os.getuid()}-{digest}"
