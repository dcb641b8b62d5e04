"""Input channels on a host: one :class:`ChannelSource` per channel, by kind.

Kinds: ``File`` (downloaded before the script starts), ``Pipe`` (streamed through one FIFO per
epoch while the script runs), ``FastFile`` (a lazy read-only view of the prefix) and
``FileSystem`` (a shared directory shown without copying). Each kind's factory is registered in :data:`KINDS` (a
:class:`~trainops._registry.Registry`);
:func:`open_channel` makes a channel's source, :func:`close_channels` closes them all, and
:func:`channel_failure` says whether one that streams while the script runs had to give up.
See ``trainops.agent.channels._base`` for the contract.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from trainops._errors import StorageError
from trainops._registry import Registry
from trainops.agent.channels._base import (
    Bind,
    ChannelContext,
    ChannelFactory,
    ChannelSource,
    channel_kind,
    check_channel_name,
)
from trainops.agent.channels._fastfile import FastFileChannel
from trainops.agent.channels._file import (
    FileChannel,
    ProgressLine,
    assign_objects,
    download_channel,
)
from trainops.agent.channels._filesystem import FileSystemChannel
from trainops.agent.channels._pipe import PipeChannel
from trainops.protocol import ChannelSpec

__all__ = [
    "KINDS",
    "Bind",
    "ChannelContext",
    "ChannelFactory",
    "ChannelSource",
    "FastFileChannel",
    "FileChannel",
    "FileSystemChannel",
    "PipeChannel",
    "ProgressLine",
    "assign_objects",
    "channel_failure",
    "channel_kind",
    "close_channels",
    "download_channel",
    "open_channel",
]

KINDS: Registry[ChannelFactory] = Registry("channel kind", error=StorageError)
KINDS.register("File", FileChannel)
KINDS.register("Pipe", PipeChannel)
KINDS.register("FastFile", FastFileChannel)
KINDS.register("FileSystem", FileSystemChannel)


def open_channel(channel: ChannelSpec, context: ChannelContext) -> ChannelSource:
    """The source for ``channel`` (not yet prepared)."""
    check_channel_name(channel.name)
    factory = KINDS.lookup(channel_kind(channel), where=f"channel {channel.name!r}: ")
    return factory(channel, context)


def close_channels(sources: Sequence[ChannelSource]) -> None:
    """Close every source, last opened first; a failing close never stops the others."""
    for source in reversed(sources):
        with contextlib.suppress(Exception):
            source.close()


def channel_failure(sources: Sequence[ChannelSource]) -> str | None:
    """Why a source stopped serving its channel while the script ran, if one did (the first).

    A kind that streams during training (Pipe) cannot raise into the agent; it keeps the reason
    in a ``failure`` attribute instead, and the job fails with it once the script has ended.
    """
    for source in sources:
        failure = getattr(source, "failure", None)
        if isinstance(failure, str) and failure:
            return failure
    return None
