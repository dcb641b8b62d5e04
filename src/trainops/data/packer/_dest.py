"""Where ``trainops pack`` writes: a local directory or an object-store prefix.

Nothing half-written ever carries a final name: a shard's files are built in a private staging
directory and then renamed into place (a local DEST, after fsync) or uploaded (an upload
appears whole). While a pack runs, DEST also holds ``.pack/plan.json`` (the configuration) and
one ``.pack/part-NNNNN.json`` per finished shard, written after the shard's files; a re-run
with the same configuration keeps every shard whose marker and files are there and packs the
rest. ``index.json`` is written last, and then ``.pack/`` is removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path

from trainops.data.packer._source import PackError, local_path, object_store

__all__ = ["LocalDest", "PackDest", "StoreDest", "open_dest"]

WORK_DIR = ".pack"
_STAGING_PREFIX = "trainops-pack-"


class PackDest(ABC):
    """One DEST; names are ``/``-separated paths under it."""

    location: str

    @abstractmethod
    def sizes(self) -> dict[str, int]:
        """Every file under DEST by name, with its size."""

    @abstractmethod
    def read(self, name: str) -> bytes | None:
        """The bytes of ``name``, or None if there is no such file."""

    @abstractmethod
    def publish(self, staged: Path, name: str) -> None:
        """Make the finished local file ``staged`` appear whole as ``name``."""

    @abstractmethod
    def remove(self, name: str) -> None: ...

    @abstractmethod
    def staging(self) -> Path:
        """A new private directory for building one shard's files."""

    def clean_staging(self) -> None:
        """Remove what an interrupted run left in its staging directories."""
        for stale in Path(tempfile.gettempdir()).glob(f"{_STAGING_PREFIX}*"):
            if stale.stat().st_uid == os.getuid() and _orphaned(stale):
                shutil.rmtree(stale, ignore_errors=True)

    def finish(self) -> None:
        """Remove the markers of a finished pack (``index.json`` is written by then)."""
        for name in self.sizes():
            if name.startswith(f"{WORK_DIR}/"):
                self.remove(name)

    def write(self, name: str, data: bytes) -> None:
        """Make ``data`` appear whole as ``name``."""
        staging = self.staging()
        try:
            (staging / "file").write_bytes(data)
            self.publish(staging / "file", name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


class LocalDest(PackDest):
    """A local directory; staging lives inside it, so a rename is atomic and copies nothing."""

    def __init__(self, root: Path) -> None:
        if root.exists() and not root.is_dir():
            raise PackError(f"DEST {root}: exists and is not a directory")
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.location = str(root)

    def sizes(self) -> dict[str, int]:
        found = {}
        for folder in (self.root, self.root / WORK_DIR):
            with contextlib.suppress(FileNotFoundError):
                for entry in os.scandir(folder):
                    if entry.is_file(follow_symlinks=False):
                        name = Path(entry.path).relative_to(self.root).as_posix()
                        found[name] = entry.stat(follow_symlinks=False).st_size
                    elif entry.name != WORK_DIR:
                        found[entry.name + "/"] = 0
        return found

    def read(self, name: str) -> bytes | None:
        path = self.root / name
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_bytes()

    def publish(self, staged: Path, name: str) -> None:
        with open(staged, "rb") as handle:
            os.fsync(handle.fileno())
        target = self.root / name
        target.parent.mkdir(exist_ok=True)
        os.replace(staged, target)
        _fsync_dir(target.parent)

    def remove(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)

    def staging(self) -> Path:
        work = self.root / WORK_DIR
        work.mkdir(exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="tmp-", dir=work))

    def clean_staging(self) -> None:
        for stale in (self.root / WORK_DIR).glob("tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)

    def finish(self) -> None:
        shutil.rmtree(self.root / WORK_DIR, ignore_errors=True)


class StoreDest(PackDest):
    """An ``s3://`` prefix; shards are built in a local temporary directory, then uploaded."""

    def __init__(self, prefix: str) -> None:
        self.location = prefix.rstrip("/")
        self._store = object_store(prefix)

    def _uri(self, name: str) -> str:
        return f"{self.location}/{name}"

    def sizes(self) -> dict[str, int]:
        return {info.key: info.size for info in self._store.list_objects(self.location + "/")}

    def read(self, name: str) -> bytes | None:
        if not self._store.exists(self._uri(name)):
            return None
        return self._store.get_bytes(self._uri(name))

    def publish(self, staged: Path, name: str) -> None:
        self._store.upload(staged, self._uri(name))
        staged.unlink()

    def remove(self, name: str) -> None:
        self._store.delete(self._uri(name))

    def staging(self) -> Path:
        staging = Path(tempfile.mkdtemp(prefix=f"{_STAGING_PREFIX}{os.getpid()}-"))
        return staging


def open_dest(dest: str) -> PackDest:
    """The DEST named by a local path, ``file://`` URI or ``s3://`` prefix."""
    root = local_path(dest)
    return LocalDest(root.resolve()) if root is not None else StoreDest(dest)


def _orphaned(staging: Path) -> bool:
    """Whether the process that made a store DEST's staging directory is gone."""
    pid = staging.name.removeprefix(_STAGING_PREFIX).split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
