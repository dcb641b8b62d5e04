"""Enter a job host's namespaces, then exec its process (see ``trainops.agent._hostns``).

``python -m trainops._hostns_exec [--probe] --hostname H --hosts-file F [--resolve NAME …] --
argv``: a private mount and UTS namespace (a user namespace too when not root), ``/etc/hosts``
bind-mounted from ``F``, the host name set to ``H``, every ``NAME`` resolved (retrying for at
most :data:`RESOLVE_SECONDS`, 30 s unless ``TRAINOPS_RESOLVE_SECONDS`` says otherwise, as
SageMaker's toolkit checks its hosts before the script), then
``argv`` exec'd. It imports only the standard library: it runs before every rank's process.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["NAME_UNRESOLVED", "main"]

HOSTS_FILE = Path("/etc/hosts")
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def _resolve_seconds(raw: str | None) -> float:
    """``TRAINOPS_RESOLVE_SECONDS`` (it comes from the job's environment): 30 s unless it is a
    finite number of seconds from 0 to a day."""
    try:
        value = float(raw or 30.0)
    except ValueError:
        return 30.0
    return value if 0 <= value <= 86400 else 30.0


RESOLVE_SECONDS = _resolve_seconds(os.environ.get("TRAINOPS_RESOLVE_SECONDS"))
NAME_UNRESOLVED = 86  # the exit code when a job host name never resolves


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _enter(hostname: str | None, hosts_file: Path | None) -> None:
    libc = _libc()
    flags = CLONE_NEWNS | CLONE_NEWUTS
    if os.getuid() != 0:
        flags |= CLONE_NEWUSER  # an unprivileged user becomes root of its own namespace
    _check(libc.unshare(flags), "unshare")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    if hosts_file is not None:
        source, target = str(hosts_file).encode(), str(HOSTS_FILE).encode()
        _check(libc.mount(source, target, None, MS_BIND, None), "mount --bind /etc/hosts")
    if hostname is not None:
        name = hostname.encode()
        _check(libc.sethostname(name, len(name)), "sethostname")


def _wait_for_names(names: Sequence[str]) -> str | None:
    """The first name that does not resolve within :data:`RESOLVE_SECONDS`, else None."""
    deadline = time.monotonic() + RESOLVE_SECONDS
    delay = 0.05
    for name in names:
        while True:
            try:
                socket.getaddrinfo(name, None)
                break
            except (socket.gaierror, UnicodeError):
                if time.monotonic() >= deadline:
                    return name
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainops._hostns_exec")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--hostname")
    parser.add_argument("--hosts-file", type=Path)
    parser.add_argument("--resolve", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        _enter(args.hostname, args.hosts_file)
    except OSError as exc:
        print(f"trainops: cannot give this host its own namespace: {exc}", file=sys.stderr)
        return 1
    if args.probe:
        return 0
    unresolved = _wait_for_names(args.resolve)
    if unresolved is not None:
        print(
            f"trainops: host name {unresolved!r} did not resolve within {RESOLVE_SECONDS:g} s",
            file=sys.stderr,
        )
        return NAME_UNRESOLVED
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    try:
        os.execvp(command[0], command)  # noqa: S606 (an argv list, never a shell string)
    except OSError as exc:  # as a shell says it: the program is missing or not runnable
        print(f"trainops: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
