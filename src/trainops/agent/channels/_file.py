"""File-mode channels: which objects a host gets, and downloading them with progress lines.

Objects are ordered by key, permuted by ``random.Random(shuffle_seed)`` when a seed is set, and
with ShardedByKey host ``i`` of ``n`` (by position in the sorted host list) takes every ``n``-th
object starting at ``i``: shares are disjoint, cover every object and differ in size by at most
one, and every host computes the same split without talking to the others.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from trainops._errors import StorageError
from trainops.agent.channels._base import Bind, ChannelContext, check_channel_name
from trainops.protocol import ChannelSpec
from trainops.storage import ObjectInfo, ObjectStore, Progress, download_objects

__all__ = ["FileChannel", "ProgressLine", "assign_objects", "download_channel"]

SHARDED_NAMES = frozenset({"ShardedByKey", "ShardedByS3Key"})
MB = 1_000_000


def assign_objects(
    objects: Sequence[ObjectInfo],
    hosts: Sequence[str],
    current_host: str,
    distribution: str,
    seed: int | None = None,
) -> list[ObjectInfo]:
    """The objects ``current_host`` downloads, in order."""
    ordered = sorted(objects, key=lambda info: info.key)
    if seed is not None:
        random.Random(seed).shuffle(ordered)
    if distribution not in SHARDED_NAMES:
        return ordered
    ranked = sorted(hosts)
    return ordered[ranked.index(current_host) :: len(ranked)]


class ProgressLine:
    """Turns transfer progress into at most one log line per ``interval`` plus a final one."""

    def __init__(
        self,
        label: str,
        emit: Callable[[str], None],
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._label = label
        self._emit = emit
        self._interval = interval
        self._clock = clock
        self._last: float | None = None

    def __call__(self, progress: Progress) -> None:
        now = self._clock()
        done = progress.done_objects >= progress.total_objects
        if done or self._last is None or now - self._last >= self._interval:
            self._last = now
            self._emit(self.describe(progress))

    def describe(self, progress: Progress) -> str:
        return (
            f"{self._label}: {progress.done_objects}/{progress.total_objects} objects, "
            f"{progress.done_bytes / MB:.1f}/{progress.total_bytes / MB:.1f} MB"
        )


def download_channel(
    store: ObjectStore,
    channel: ChannelSpec,
    dest: Path,
    *,
    hosts: Sequence[str],
    current_host: str,
    log: Callable[[str], None],
) -> Progress:
    """Download this host's share of ``channel`` into ``dest``."""
    check_channel_name(channel.name)
    if channel.uri is None:
        raise StorageError(f"channel {channel.name!r}: a File-mode download needs a uri")
    found = store.list_objects(channel.uri)
    if not found:
        raise StorageError(f"channel {channel.name!r}: no objects found under {channel.uri}")
    share = assign_objects(found, hosts, current_host, channel.distribution, channel.shuffle_seed)
    progress = ProgressLine(f"Downloading channel {channel.name!r}", log)
    if not share:
        log(f"Channel {channel.name!r}: no objects for {current_host} ({len(found)} in all)")
        return Progress(total_objects=0, total_bytes=0)
    return download_objects(store, share, dest, on_progress=progress)


class FileChannel:
    """File mode: the host's share is downloaded into ``input/data/<channel>`` before the script
    starts; nothing runs beside the script."""

    def __init__(self, channel: ChannelSpec, context: ChannelContext) -> None:
        self.channel = channel
        self._context = context

    def prepare(self) -> None:
        if self.channel.uri is None:
            raise StorageError(f"channel {self.channel.name!r}: a File-mode download needs a uri")
        dest = self._context.data_dir / self.channel.name
        dest.mkdir(parents=True, exist_ok=True)
        download_channel(
            self._context.store_for(self.channel.uri),
            self.channel,
            dest,
            hosts=self._context.hosts,
            current_host=self._context.current_host,
            log=self._context.log,
        )

    def binds(self) -> Sequence[Bind]:
        return ()

    def close(self) -> None:
        return None
