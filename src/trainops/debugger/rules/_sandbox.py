"""Confining the process that runs a custom rule: Landlock, resource limits, no privileges.

A custom rule is code from the job's submitter, run over the job's tensors. Its process
(``_evaluator``) confines itself before it imports the rule: :func:`confine` sets
``no_new_privs``, bounds its address space, CPU time, open files and file sizes
(``setrlimit``), and with Landlock (Linux 5.13+) allows reading only the paths given (the
Python installation, the rule's file, the job's tensors) and writing nowhere, and, where the
kernel has Landlock's network rules (ABI 4+), no TCP connection at all (no loopback server to
reach); abstract Unix sockets and signals outside the process are scoped out where the kernel
can (ABI 6+). :func:`landlock_abi` says what the kernel has; a kernel without Landlock cannot
confine a rule, and the caller refuses to run one there.
"""

from __future__ import annotations

import ctypes
import os
import resource
from collections.abc import Iterable

__all__ = ["SandboxError", "confine", "landlock_abi"]

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem access rights (Landlock ABI 1-3, uapi/linux/landlock.h).
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1  # execute .. make_sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class SandboxError(RuntimeError):
    """The process could not be confined (the message says what failed)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or it is disabled)."""
    result = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(result), 0)


def _handled_fs(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def confine(
    readable: Iterable[str], *, memory_bytes: int, cpu_seconds: int, max_files: int = 256
) -> int:
    """Confine this process for good (see the module docstring); returns the Landlock ABI
    used. Raises SandboxError when Landlock is missing or a step fails."""
    _limits(memory_bytes, cpu_seconds, max_files)
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxError(f"prctl(no_new_privs) failed: {os.strerror(ctypes.get_errno())}")
    abi = landlock_abi()
    if abi < 1:
        raise SandboxError(
            "this kernel has no Landlock (Linux 5.13+): a custom rule cannot be confined"
        )
    attr = _RulesetAttr(_handled_fs(abi), 0, 0)
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
    size = 8 if abi < 4 else (16 if abi < 6 else ctypes.sizeof(_RulesetAttr))
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise SandboxError(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        for path in sorted(set(readable)):
            _allow_read(libc, ruleset, path)
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise SandboxError(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


def _allow_read(libc: ctypes.CDLL, ruleset: int, path: str) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that is not there needs no rule
    try:
        directory = os.path.isdir(path)
        rights = _READ_FILE | _EXECUTE | (_READ_DIR if directory else 0)
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise SandboxError(
                f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}"
            )
    finally:
        os.close(fd)


def _limits(memory_bytes: int, cpu_seconds: int, max_files: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
