"""File-system channels (SageMaker's ``FileSystemDataSource``: EFS, FSx for Lustre, NFS, a local
path): a directory every host already sees, shown at ``input/data/<channel>`` without copying.

The directory is bound into the job's private mount namespace (:class:`Bind`), read-only unless
``access_mode: rw``: a script that writes into a read-only channel gets ``EROFS``, and nothing
appears in the machine's own mount table. Where the machine allows no namespaces (no root and
no user namespaces), :func:`show_directory` makes ``input/data/<channel>`` a symbolic link to
the directory instead and says in the job's log that read-only is not enforced there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from trainops._errors import StorageError
from trainops.agent.channels._base import Bind, ChannelContext, check_channel_name
from trainops.agent.supervision._hostns import namespaces_available
from trainops.protocol import ChannelSpec

__all__ = ["FileSystemChannel", "checked_directory", "remove_link", "show_directory"]

NOT_ENFORCED = (
    "WARNING: channel {name!r}: this machine allows no private mount namespace, so "
    "input/data/{name} is a symbolic link to {source} and read-only is not enforced"
)


def checked_directory(name: str, path: str, *, writable: bool, host: str) -> Path:
    """``path`` as a directory the agent may show (absolute, present, readable; writable if
    asked); one clear error naming the channel and the host otherwise."""
    where = f"channel {name!r}: file_system.directory_path {path!r}"
    directory = Path(path)
    if not directory.is_absolute():
        raise StorageError(f"{where} must be an absolute path")
    if not directory.exists():
        raise StorageError(f"{where} does not exist on {host}")
    if not directory.is_dir():
        raise StorageError(f"{where} is not a directory on {host}")
    if not os.access(directory, os.R_OK | os.X_OK):
        raise StorageError(f"{where} cannot be read by the agent on {host}")
    if writable and not os.access(directory, os.W_OK):
        raise StorageError(f"{where} is access_mode rw but not writable on {host}")
    return directory.resolve()


def show_directory(
    name: str, source: Path, target: Path, *, read_only: bool, context: ChannelContext
) -> tuple[Bind, ...]:
    """``source`` at ``target`` for the job's processes: a bind in their namespace, or (where
    there is none) a symbolic link, with a warning when read-only cannot be enforced."""
    target.mkdir(parents=True, exist_ok=True)
    if namespaces_available():
        return (Bind(source, target, read_only),)
    if any(target.iterdir()):
        raise StorageError(f"channel {name!r}: {target} is not empty; cannot link it")
    target.rmdir()
    target.symlink_to(source, target_is_directory=True)
    if read_only:
        context.log(NOT_ENFORCED.format(name=name, source=source))
    return ()


def remove_link(target: Path) -> None:
    """Undo :func:`show_directory`'s link (an empty directory is left, as the tree had)."""
    if target.is_symlink():
        target.unlink()
        target.mkdir(exist_ok=True)


class FileSystemChannel:
    """``file_system.directory_path`` at ``input/data/<channel>``, read-only unless rw."""

    def __init__(self, channel: ChannelSpec, context: ChannelContext) -> None:
        self.channel = channel
        self._context = context
        self._binds: tuple[Bind, ...] = ()
        self._target = context.data_dir / channel.name

    def prepare(self) -> None:
        check_channel_name(self.channel.name)
        spec = self.channel.file_system
        if spec is None:
            raise StorageError(f"channel {self.channel.name!r}: no file_system to show")
        if self._context.stopping():
            return
        writable = spec.writable
        source = checked_directory(
            self.channel.name,
            spec.directory_path,
            writable=writable,
            host=self._context.current_host,
        )
        self._binds = show_directory(
            self.channel.name,
            source,
            self._target,
            read_only=not writable,
            context=self._context,
        )
        mode = "read-write" if writable else "read-only"
        self._context.log(f"Channel {self.channel.name!r}: {source} shown {mode}, not copied")

    def binds(self) -> Sequence[Bind]:
        return self._binds

    def close(self) -> None:
        self._binds = ()
        remove_link(self._target)
