"""Keeping an agent's memory to itself: ``prctl(PR_SET_DUMPABLE, 0)``.

An agent holds its host's token (and the fork server every agent is forked from would otherwise
be a window into all of them). A process that is not dumpable cannot be read through
``/proc/<pid>/mem`` or ``environ``, nor traced, by another process of the same user without
``CAP_SYS_PTRACE``, and leaves no core dump; its ``/proc/<pid>`` files belong to root. A job's
script runs as the same user as its agent: this keeps it (and other jobs' scripts) out of the
agent's memory. ``exec`` makes a process dumpable again, so the script the agent starts is not
affected, and the agent still reads its children's ``/proc`` entries as before.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["forbid_memory_reads"]

_PR_SET_DUMPABLE = 4


def forbid_memory_reads() -> bool:
    """Make this process non-dumpable (Linux); whether it now is."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # this process's own symbols: libc's prctl
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
