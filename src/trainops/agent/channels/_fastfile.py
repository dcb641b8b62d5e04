"""FastFile channels: ``input/data/<channel>`` is a lazy, read-only view of the object prefix.

The script starts as soon as the view is there; an object's bytes are fetched when it is read.

- ``s3://``: an rclone FUSE mount, in a mount namespace of its own that ends with it
  (``_rclone``), grafted into the job's processes; reads stream with rclone's read-ahead.
- ``file://``: nothing needs fetching: the directory itself is bound read-only into the job's
  namespace (copies nothing); a host's share is a tree of hard links bound the same way.

Which objects a host sees is ``_view``'s: the whole prefix, or with ShardedByKey (and
``shuffle_seed``) or a ManifestFile exactly the objects File mode would give it. Before
``prepare()`` returns, one process in a namespace like the script's grafts the view and lists
it: the mount answers, and an empty prefix is a clear error. Where FUSE cannot be used, the job
fails naming the channel and the reason, unless the machine's settings allow falling back to
File mode (``TRAINOPS_FASTFILE_FALLBACK=1``): the host's share is then downloaded, with a warning.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from trainops._errors import StorageError
from trainops.agent.channels._base import Bind, ChannelContext, check_channel_name
from trainops.agent.channels._file import FileChannel
from trainops.agent.channels._filesystem import remove_link, show_directory
from trainops.agent.channels._rclone import RcloneMount, fuse_problem
from trainops.agent.channels._view import View, link_tree, plan_view, write_key_list
from trainops.agent.supervision._hostns import mount_arguments
from trainops.protocol import ChannelSpec

__all__ = ["FastFileChannel"]

_CHECK_SECONDS = 120.0
_EMPTY = 3  # _hostns_exec --expect-entries: the directory has no entry


class FastFileChannel:
    """One FastFile channel on one host (see the module docstring)."""

    def __init__(self, channel: ChannelSpec, context: ChannelContext) -> None:
        self.channel = channel
        self._context = context
        self._target = context.data_dir / channel.name
        self._state = context.scratch_dir / "fastfile" / channel.name
        self._binds: tuple[Bind, ...] = ()
        self._mount: RcloneMount | None = None

    @property
    def failure(self) -> str | None:
        """Why the view stopped answering while the script ran (rclone ended), if it did."""
        why = None if self._mount is None else self._mount.failure()
        if why is None or self._mount is None:
            return None
        return f"channel {self.channel.name!r}: {why}: {self._mount.log_tail()}"

    @property
    def rclone_pid(self) -> int | None:
        return None if self._mount is None else self._mount.pid

    def prepare(self) -> None:
        check_channel_name(self.channel.name)
        uri = self.channel.uri
        if uri is None:
            raise StorageError(f"channel {self.channel.name!r}: FastFile mode needs a uri")
        if self._context.stopping():
            return
        self._target.mkdir(parents=True, exist_ok=True)
        try:
            if uri.startswith("s3://"):
                self._prepare_s3()
            else:
                self._prepare_local(uri)
        except OSError as exc:
            raise StorageError(f"channel {self.channel.name!r}: {exc}") from None

    def binds(self) -> Sequence[Bind]:
        return self._binds

    def close(self) -> None:
        self._binds = ()
        if self._mount is not None:
            self._mount.stop()
        remove_link(self._target)
        shutil.rmtree(self._state, ignore_errors=True)

    # file:// -----------------------------------------------------------------------------

    def _prepare_local(self, uri: str) -> None:
        view = self._view()
        root = Path(view.root.removeprefix("file://"))
        if view.keys is None:
            if not root.is_dir() or not any(root.iterdir()):
                raise StorageError(f"channel {self.channel.name!r}: no objects found under {uri}")
            source = root
        elif not view.keys:
            return self._no_share(view)
        else:
            source = self._link_share(view, root)
        name = self.channel.name
        self._binds += show_directory(
            name, source, self._target, read_only=True, context=self._context
        )
        self._context.log(f"Channel {name!r}: {uri} shown read-only (FastFile), not copied")

    def _link_share(self, view: View, root: Path) -> Path:
        """The host's share as a tree of links; where some are symbolic links, the objects'
        directory is made read-only in the job's namespace too (writes through a link fail)."""
        dest = self._state / "view"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        if link_tree(self.channel.name, view, dest) and root not in self._target.parents:
            self._binds += (Bind(root, root, read_only=True),)
        return dest

    def _no_share(self, view: View) -> None:
        host = self._context.current_host
        self._context.log(
            f"Channel {self.channel.name!r}: no objects for {host} ({view.total} in all)"
        )

    def _view(self) -> View:
        ctx = self._context
        return plan_view(self.channel, ctx.hosts, ctx.current_host, ctx.store_for)

    # s3:// -------------------------------------------------------------------------------

    def _prepare_s3(self) -> None:
        problem = fuse_problem()
        if problem is not None:
            return self._without_fuse(problem)
        view = self._view()
        if view.keys is not None and not view.keys:
            return self._no_share(view)
        self._state.mkdir(parents=True, exist_ok=True)
        keys = None if view.keys is None else write_key_list(view.keys, self._state / "keys")
        mount = self._mount = RcloneMount(
            view.root,
            self._state / "mnt",
            s3=self._context.settings.s3,
            state_dir=self._state,
            files_from=keys,
        )
        try:
            mount.start(self._context.stopping)
        except StorageError as exc:
            raise StorageError(
                f"channel {self.channel.name!r}: {exc}: {mount.log_tail()}"
            ) from None
        bind = Bind(mount.mount_point, self._target, read_only=True, namespace=mount.namespace)
        self._check_view(bind, view)
        self._binds = (bind,)
        self._context.log(f"Channel {self.channel.name!r}: {view.root} mounted (FastFile)")

    def _check_view(self, bind: Bind, view: View) -> None:
        """Graft the view as the script's processes will, and list it."""
        check = [sys.executable, "-m", "trainops._hostns_exec", *mount_arguments([bind])]
        check += ["--expect-entries", str(self._target)]
        try:
            done = subprocess.run(check, capture_output=True, timeout=_CHECK_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise StorageError(
                f"channel {self.channel.name!r}: the FastFile view of {view.root} did not answer "
                f"within {_CHECK_SECONDS:g} s"
            ) from None
        if done.returncode == _EMPTY:
            raise StorageError(f"channel {self.channel.name!r}: no objects found under {view.root}")
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip()
            raise StorageError(f"channel {self.channel.name!r}: the FastFile view failed: {said}")

    def _without_fuse(self, problem: str) -> None:
        name = self.channel.name
        if not self._context.settings.fastfile_fallback:
            raise StorageError(
                f"channel {name!r}: FastFile mode on s3:// needs FUSE, and {problem}; set "
                "TRAINOPS_FASTFILE_FALLBACK=1 to download such channels as in File mode instead"
            )
        self._context.log(f"WARNING: channel {name!r}: {problem}; downloading it (File mode)")
        FileChannel(self.channel, self._context).prepare()
