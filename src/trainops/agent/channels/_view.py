"""What a FastFile channel shows one host: the whole prefix, or exactly the host's share.

- FullyReplicated over a prefix (``shuffle_seed`` changes nothing a directory shows): the prefix
  itself, with nothing listed up front; the lazy view lists a directory when the script does.
  A ``file://`` directory with a symbolic link under it is shown as its listed regular files
  instead (below), so no link is ever followed out of it.
- ShardedByKey, or a ManifestFile: the objects File mode would download on this host (the one
  share rule of ``_share``, epoch 0), under the same relative names (their keys). On
  ``file://`` that is a tree of hard links in the agent's scratch directory (:func:`link_tree`;
  a symbolic link where the object is on another file system), bound read-only; on ``s3://``
  it is rclone's ``--files-from-raw`` list (:func:`write_key_list`).

A key that cannot be a relative path in such a view (absolute, ``.``/``..``/empty parts, a
line break or NUL, or both a file and a directory) is refused with one error naming the channel.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainops._errors import StorageError
from trainops.agent.channels._file import assign_objects
from trainops.agent.channels._manifest import manifest_objects
from trainops.agent.channels._share import SHARDED_NAMES, share_of
from trainops.protocol import ChannelSpec
from trainops.storage import ObjectInfo, ObjectStore

__all__ = ["View", "link_tree", "plan_view", "write_key_list"]

_CROSS_DEVICE = (errno.EXDEV, errno.EPERM)  # a hard link is not possible (or not allowed) here


@dataclass(frozen=True, slots=True)
class View:
    """``root`` (a URI ending in ``/``), whole (``keys`` None) or only ``keys`` under it."""

    root: str
    keys: tuple[str, ...] | None
    total: int | None = None  # how many objects the channel has, where they were listed


def plan_view(
    channel: ChannelSpec,
    hosts: Sequence[str],
    current_host: str,
    store_for: Callable[[str], ObjectStore],
) -> View:
    """The view of ``channel`` on ``current_host``."""
    uri = channel.uri
    if uri is None:
        raise StorageError(f"channel {channel.name!r}: FastFile mode needs a uri")
    manifest = channel.s3_data_type == "ManifestFile"
    whole = not manifest and channel.distribution not in SHARDED_NAMES
    if whole and not _names_a_file(uri) and not _holds_links(uri):
        return View(uri.rstrip("/") + "/", None)
    if manifest:
        listed = manifest_objects(uri, store_for)
        share = share_of(
            listed, hosts, current_host, channel.distribution, seed=channel.shuffle_seed
        )
    else:
        listed = store_for(uri).list_objects(uri)
        if not listed:
            raise StorageError(f"channel {channel.name!r}: no objects found under {uri}")
        share = assign_objects(
            listed, hosts, current_host, channel.distribution, channel.shuffle_seed
        )
    root = _common_root(channel.name, listed)
    return View(root, tuple(_checked_key(channel.name, info.key) for info in share), len(listed))


def _holds_links(uri: str) -> bool:
    """Whether a ``file://`` directory has a symbolic link anywhere under it. Such a directory is
    shown as the tree of its listed regular files (as File mode downloads them), never bound
    whole: a link could point anywhere on the machine."""
    if not uri.startswith("file://"):
        return False
    for _folder, dirs, files in os.walk(uri.removeprefix("file://")):
        if any(os.path.islink(os.path.join(_folder, n)) for n in (*dirs, *files)):
            return True
    return False


def _names_a_file(uri: str) -> bool:
    """A ``file://`` URI of one file (shown as a view of that file alone)."""
    return uri.startswith("file://") and Path(uri.removeprefix("file://")).is_file()


def _common_root(name: str, objects: Sequence[ObjectInfo]) -> str:
    """The URI every object's key is relative to (a listing's prefix, a manifest's prefix)."""
    roots = {info.uri[: len(info.uri) - len(info.key)] for info in objects}
    if len(roots) != 1 or not all(info.uri.endswith(info.key) for info in objects):
        raise StorageError(f"channel {name!r}: its objects do not share one prefix to show")
    return roots.pop()


def _checked_key(name: str, key: str) -> str:
    parts = key.split("/")
    bad = key.startswith("/") or any(part in ("", ".", "..") for part in parts)
    if bad or any(c in key for c in "\n\r\0"):
        raise StorageError(
            f"channel {name!r}: object key {key!r} cannot be a file of a FastFile view "
            "(an absolute path, an empty, '.' or '..' part, or a line break)"
        )
    return key


def write_key_list(keys: Sequence[str], path: Path) -> Path:
    """``keys``, one a line, for ``rclone --files-from-raw`` (written whole, then renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{key}\n" for key in keys), encoding="utf-8")
    os.replace(tmp, path)
    return path


def link_tree(name: str, view: View, dest: Path) -> bool:
    """``dest`` holding the view's keys as links to the objects under ``view.root`` (a
    ``file://`` directory); True when some had to be symbolic links (another file system)."""
    assert view.keys is not None
    root = Path(view.root.removeprefix("file://"))
    symbolic = False
    for key in view.keys:
        place = dest / key
        try:
            place.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise StorageError(
                f"channel {name!r}: {key!r} is both a file and a directory"
            ) from None
        symbolic |= _link(root / key, place)
    return symbolic


def _link(source: Path, place: Path) -> bool:
    try:
        os.link(source, place, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _CROSS_DEVICE:
            raise
        place.symlink_to(source)
        return True
    return False
