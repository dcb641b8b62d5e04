"""A full disk, said in one line: recognising ENOSPC in an exception's chain, and naming the
mount point that is full and what to free there.

Used wherever a full disk must end in a message, not a traceback: the host agent (its failure
reasons) and the ``trainops`` command (any command whose write found no space).
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

__all__ = ["FULL_BELOW_BYTES", "full_disk_message", "is_full", "is_out_of_space", "mount_point"]

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
# Less than this free means a write that just failed there ran out of space.
FULL_BELOW_BYTES = 1 << 20


def is_out_of_space(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from, is ENOSPC (or EDQUOT)."""
    return _no_space_error(exc) is not None


def is_full(path: Path) -> bool:
    """Whether the file system holding ``path`` has less than ``FULL_BELOW_BYTES`` free."""
    try:
        return shutil.disk_usage(mount_point(path)).free < FULL_BELOW_BYTES
    except OSError:
        return False


def mount_point(path: Path) -> Path:
    """The mount point of the file system that holds ``path`` (or would, for a missing path)."""
    current = Path(os.path.abspath(path))
    while not current.exists() and current != current.parent:
        current = current.parent
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def full_disk_message(exc: BaseException, candidates: Iterable[Path]) -> str:
    """``no space left on device under <mount> (writing <file>): free some space there ...``.

    The mount is the one of the file the failed write named, else the first of ``candidates``
    (the home, the temporary folder, ...) that is full now.
    """
    error = _no_space_error(exc)
    named = None if error is None else (error.filename or error.filename2)
    where: Path | None = Path(os.fsdecode(named)) if isinstance(named, str | bytes) else None
    full = where or next((p for p in candidates if is_full(p)), None)
    if full is None:
        return "no space left on device: free some space on the disk this command writes to"
    writing = f" (writing {_shown(where)})" if where is not None else ""
    mount = _shown(mount_point(full))
    return (
        f"no space left on device under {mount}{writing}: free some space there "
        f"(`du -xsh {mount}/*` shows what takes it) and run the command again"
    )


def _shown(path: Path) -> str:
    """``path`` as text on one line: quoted, with escapes, if it holds a newline or the like."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def _no_space_error(exc: BaseException) -> OSError | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _NO_SPACE:
            return current
        current = current.__cause__ or current.__context__
    return None
