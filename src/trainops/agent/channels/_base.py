"""The channel seam: how one input channel reaches a host's processes.

Each kind of channel (File, Pipe, FastFile, a shared file system) is a :class:`ChannelSource`
made by a factory registered under its kind (:func:`channel_kind` names the kind of a spec). The
agent opens every channel of the job before the script starts and closes them all after it
ended, whatever the outcome:

- ``prepare()`` returns once the script may start reading: File mode has downloaded the host's
  share, FastFile has mounted its lazy view, Pipe has created its first FIFO and started the
  writer that serves it. It may be slow and checks ``context.stopping()`` between steps.
- ``binds()`` lists directories to show inside the job's private mount namespace (a read-only
  bind of a shared directory, say): the launcher applies them to the script's processes only, so
  nothing appears in the machine's own mount table.
- ``close()`` stops what ``prepare`` started (writer threads, mounts) and is called exactly once,
  also when ``prepare`` raised; it must not raise.

A new kind: write a module with a ``ChannelSource``, register its factory in
``trainops.agent.channels`` and add it to the conformance suite in ``tests/agent/channels``
(see ``docs/internals/channels.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainops._errors import StorageError
from trainops._settings import Settings
from trainops.protocol import ChannelSpec
from trainops.storage import ObjectStore

__all__ = [
    "Bind",
    "ChannelContext",
    "ChannelFactory",
    "ChannelSource",
    "channel_kind",
    "check_channel_name",
]


@dataclass(frozen=True, slots=True)
class Bind:
    """``source`` shown at ``target`` (a path in the host's tree) to the job's processes.

    ``namespace``: where ``source`` is a mount made in another mount namespace (a FastFile
    channel's FUSE mount), that namespace's file (``/proc/<pid>/ns/mnt``); the mount is grafted
    from there. None: ``source`` is a path as the agent sees it.
    """

    source: Path
    target: Path
    read_only: bool = True
    namespace: Path | None = None


@dataclass(frozen=True, slots=True)
class ChannelContext:
    """What a channel may use on its host."""

    data_dir: Path  # the host's input/data: channel directories and FIFOs live here
    scratch_dir: Path  # private to the agent on this host (caches, mount state); not the script's
    hosts: Sequence[str]
    current_host: str
    store_for: Callable[[str], ObjectStore]
    settings: Settings
    log: Callable[[str], None]  # one line for the job's log (the agent's stream)
    stopping: Callable[[], bool]  # True once the job is being stopped


class ChannelSource(Protocol):
    """One channel on one host (see the module docstring for the order of calls)."""

    channel: ChannelSpec

    def prepare(self) -> None: ...

    def binds(self) -> Sequence[Bind]: ...

    def close(self) -> None: ...


ChannelFactory = Callable[[ChannelSpec, ChannelContext], ChannelSource]


def channel_kind(channel: ChannelSpec) -> str:
    """``FileSystem`` for a shared directory, else the channel's input mode."""
    return "FileSystem" if channel.file_system is not None else channel.mode


def check_channel_name(name: str) -> None:
    """Refuse a name that is not one path component (the spec refuses it too).

    It names a directory (or FIFOs) under ``input/data``: ``.``, ``..`` or a separator would put
    the channel outside its own place.
    """
    if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise StorageError(f"channel {name!r}: not a valid channel directory name")
