"""File-mode channels: which objects a host gets, and downloading them with progress lines.

Objects are ordered by key, permuted by ``random.Random(shuffle_seed)`` when a seed is set, and
with ShardedByKey host ``i`` of ``n`` (by position in the sorted host list) takes every ``n``-th
object starting at ``i``: shares are disjoint, cover every object and differ in size by at most
one, and every host computes the same split without talking to the others (``_share`` has the
rule, and what a later epoch of a Pipe channel does with it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from trainops._errors import StorageError
from trainops.agent.channels._base import Bind, ChannelContext, check_channel_name
from trainops.agent.channels._manifest import manifest_objects
from trainops.agent.channels._share import share_of
from trainops.protocol import ChannelSpec
from trainops.storage import ObjectInfo, ObjectStore, Progress, download_objects

__all__ = ["FileChannel", "ProgressLine", "assign_objects", "download_channel"]

MB = 1_000_000


def assign_objects(
    objects: Sequence[ObjectInfo],
    hosts: Sequence[str],
    current_host: str,
    distribution: str,
    seed: int | None = None,
    epoch: int = 0,
) -> list[ObjectInfo]:
    """The objects ``current_host`` gets in ``epoch`` (File mode has epoch 0 only), in order."""
    ordered = sorted(objects, key=lambda info: info.key)
    return share_of(ordered, hosts, current_host, distribution, seed=seed, epoch=epoch)


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
    store_for: Callable[[str], ObjectStore] | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> Progress:
    """Download this host's share of ``channel`` into ``dest``.

    ``store`` holds ``channel.uri``; a manifest's objects may live elsewhere, so ``store_for``
    (when given) picks the store of each. Once ``stopping()`` is true no new object starts.
    """
    check_channel_name(channel.name)
    if channel.uri is None:
        raise StorageError(f"channel {channel.name!r}: a File-mode download needs a uri")
    share, total = _share(store, channel, hosts, current_host, store_for)
    progress = ProgressLine(f"Downloading channel {channel.name!r}", log)
    if not share:
        log(f"Channel {channel.name!r}: no objects for {current_host} ({total} in all)")
        return Progress(total_objects=0, total_bytes=0)
    source = store if store_for is None else store_for(share[0].uri)

    def on_progress(done: Progress) -> None:
        progress(done)
        if stopping():
            raise StorageError(f"channel {channel.name!r}: download stopped")

    return download_objects(source, share, dest, on_progress=on_progress)


def _share(
    store: ObjectStore,
    channel: ChannelSpec,
    hosts: Sequence[str],
    current_host: str,
    store_for: Callable[[str], ObjectStore] | None,
) -> tuple[list[ObjectInfo], int]:
    """This host's objects and how many the channel has: listed, or named by a manifest (whose
    order is kept, as SageMaker keeps it)."""
    assert channel.uri is not None
    seed, distribution = channel.shuffle_seed, channel.distribution
    if channel.s3_data_type == "ManifestFile":
        listed = manifest_objects(channel.uri, store_for or (lambda _uri: store))
        return share_of(listed, hosts, current_host, distribution, seed=seed), len(listed)
    found = store.list_objects(channel.uri)
    if not found:
        raise StorageError(f"channel {channel.name!r}: no objects found under {channel.uri}")
    return assign_objects(found, hosts, current_host, distribution, seed), len(found)


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
        if self._context.stopping():
            return
        download_channel(
            self._context.store_for(self.channel.uri),
            self.channel,
            dest,
            hosts=self._context.hosts,
            current_host=self._context.current_host,
            log=self._context.log,
            store_for=self._context.store_for,
            stopping=self._context.stopping,
        )

    def binds(self) -> Sequence[Bind]:
        return ()

    def close(self) -> None:
        return None
