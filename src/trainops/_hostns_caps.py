"""What a job's process may still do once it runs: Docker's default capabilities, no new privileges.

A script that runs as root inside its host's namespaces must not be able to undo them: unmount
the masks over ``$TRAINOPS_HOME``, mount another ``/proc``, or ptrace and read the memory of the
processes outside. :func:`contain` gives the calling process (and everything it starts) the
capability set Docker gives a container by default (the one SageMaker's training containers run
with: no ``CAP_SYS_ADMIN``, ``CAP_SYS_PTRACE``, ``CAP_SYS_MODULE`` …; ``CAP_MKNOD`` left out
too, see :data:`DOCKER_DEFAULT`), removes the others from
the bounding set too (so that no ``execve``, of a set-user-ID program either, gains them back),
clears the ambient set and sets ``no_new_privs``.

Standard library only (ctypes), like ``_hostns_exec``: it runs before every rank's process.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["DOCKER_DEFAULT", "contain", "effective_capabilities"]

# CAP_CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP, NET_BIND_SERVICE,
# NET_RAW, SYS_CHROOT, AUDIT_WRITE, SETFCAP: Docker's default set (moby's oci/caps) less
# CAP_MKNOD, which Docker pairs with a device cgroup that trainops does not have (a root
# script could otherwise make a node of the machine's disk in its tree and read it raw).
DOCKER_DEFAULT = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 29, 31})
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAP_FILE = "/proc/sys/kernel/cap_last_cap"
_EINVAL = 22


class _Header(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _Data(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL("libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _last_capability() -> int:
    try:
        with open(_LAST_CAP_FILE, encoding="ascii") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 40  # CAP_CHECKPOINT_RESTORE, the last one Linux 5.9 to 6.x know


def _mask(caps: frozenset[int]) -> tuple[int, int]:
    bits = sum(1 << cap for cap in caps)
    return bits & 0xFFFFFFFF, bits >> 32


def contain(kept: frozenset[int] = DOCKER_DEFAULT) -> None:
    """Keep only ``kept`` capabilities (bounding, effective, permitted, inheritable; ambient
    cleared) and set ``no_new_privs``. Raises ``OSError`` if a step is refused."""
    libc = _libc()
    for cap in range(_last_capability() + 1):
        refused = cap not in kept and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
        if refused and ctypes.get_errno() != _EINVAL:  # EINVAL: a capability this kernel lacks
            _check(-1, f"drop capability {cap} from the bounding set")
    header, data = _Header(_CAPABILITY_VERSION_3, 0), (_Data * 2)()
    _check(libc.capget(ctypes.byref(header), data), "capget")
    for word, allowed in enumerate(_mask(kept)):
        data[word].effective &= allowed
        data[word].permitted &= allowed
        data[word].inheritable &= allowed
    _check(libc.capset(ctypes.byref(header), data), "capset")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient caps")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def effective_capabilities(status: str) -> int:
    """The ``CapEff`` bits of a ``/proc/<pid>/status`` text (0 when absent)."""
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0
