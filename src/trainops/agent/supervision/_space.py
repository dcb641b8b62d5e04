"""A full disk under the host's tree: recognising it, saying where and while doing what, and
freeing the outputs that can no longer be uploaded so the agent can still report how it ended.

The host's tree, the agent's journal and (with the local backend) the metadata store and the
``file://`` object store usually share one file system. Once it is full nothing can be recorded,
not even the host's exit; the outputs of a host that cannot be packed are lost anyway (SageMaker
discards the instance's volume too), so freeing them is what lets the failure be reported.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from trainops._disk import FULL_BELOW_BYTES, is_out_of_space, mount_point

__all__ = ["disk_full", "free_paths", "is_out_of_space", "no_space_reason"]


def no_space_reason(path: Path, doing: str) -> str:
    """``no space left on device under <mount point of path> while <doing>``."""
    return f"no space left on device under {mount_point(path)} while {doing}"


def disk_full(path: Path) -> bool:
    try:
        return shutil.disk_usage(path).free < FULL_BELOW_BYTES
    except OSError:
        return False


def free_paths(paths: Iterable[Path]) -> int:
    """Delete the contents of these folders (and these files); returns the bytes freed."""
    freed = 0
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            for child in list(path.iterdir()):
                freed += free_paths([child])
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            try:
                freed += path.lstat().st_size
                path.unlink()
            except OSError:
                continue
    return freed
