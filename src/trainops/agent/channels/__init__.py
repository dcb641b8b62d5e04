"""Input channels on a host: one :class:`ChannelSource` per channel, by kind.

Kinds: ``File`` (downloaded before the script starts). Each kind registers its factory in
:data:`KINDS`; :func:`open_channels` opens a job's channels in order and closes the ones
already opened if one fails. See ``trainops.agent.channels._base`` for the contract.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from trainops._errors import StorageError
from trainops.agent.channels._base import (
    Bind,
    ChannelContext,
    ChannelFactory,
    ChannelSource,
    channel_kind,
    check_channel_name,
)
from trainops.agent.channels._file import (
    FileChannel,
    ProgressLine,
    assign_objects,
    download_channel,
)
from trainops.protocol import ChannelSpec

__all__ = [
    "KINDS",
    "Bind",
    "ChannelContext",
    "ChannelFactory",
    "ChannelSource",
    "FileChannel",
    "ProgressLine",
    "assign_objects",
    "channel_kind",
    "close_channels",
    "download_channel",
    "open_channel",
]

KINDS: dict[str, ChannelFactory] = {
    "File": FileChannel,
}


def open_channel(channel: ChannelSpec, context: ChannelContext) -> ChannelSource:
    """The source for ``channel`` (not yet prepared)."""
    check_channel_name(channel.name)
    kind = channel_kind(channel)
    factory = KINDS.get(kind)
    if factory is None:
        raise StorageError(f"channel {channel.name!r}: {kind} channels are not supported here")
    return factory(channel, context)


def close_channels(sources: Sequence[ChannelSource]) -> None:
    """Close every source, last opened first; a failing close never stops the others."""
    for source in reversed(sources):
        with contextlib.suppress(Exception):
            source.close()
