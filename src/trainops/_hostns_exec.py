"""Enter a job host's namespaces, then exec its process (see ``trainops.agent._hostns``).

``python -m trainops._hostns_exec [--probe] [--hostname H --hosts-file F] [--resolve NAME …]
[--bind SRC DST ro|rw …] [--graft NS INODE SRC DST ro|rw …] [--opt-ml ROOT]
[--die-with-parent PPID] [--expect-entries DIR] -- argv``: a private mount and UTS namespace (a
user namespace too when not root), ``/etc/hosts`` bind-mounted from ``F``, the host name set to
``H``, the channels' binds and grafts applied and the host's tree shown at ``/opt/ml``
(``trainops._hostns_mounts``), every ``NAME`` resolved (retrying for at most
:data:`RESOLVE_SECONDS`, 30 s unless ``TRAINOPS_RESOLVE_SECONDS`` says otherwise, as SageMaker's
toolkit checks its hosts before the script), then ``argv`` exec'd in the same directory (seen
under ``/opt/ml`` when it is in the tree). ``--die-with-parent`` makes the process end when the
agent that started it ends (a FUSE daemon, whose mount then goes with its namespace);
``--expect-entries`` ends with status 3 when ``DIR`` has no entry and 1 when it cannot be
listed (a check, run instead of a command). It imports only the standard library: it runs before every rank's process.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trainops import _hostns_mounts as mounts

__all__ = ["NAME_UNRESOLVED", "main"]

HOSTS_FILE = Path("/etc/hosts")
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainops._hostns_exec")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--hostname")
    parser.add_argument("--hosts-file", type=Path)
    parser.add_argument("--resolve", action="append", default=[])
    parser.add_argument("--bind", nargs=3, action="append", default=[], metavar="SRC DST MODE")
    parser.add_argument(
        "--graft", nargs=5, action="append", default=[], metavar="NS INODE SRC DST MODE"
    )
    parser.add_argument("--opt-ml", type=Path)
    parser.add_argument("--die-with-parent", type=int, metavar="PPID")
    parser.add_argument("--expect-entries", type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser


def _die_with_parent(ppid: int) -> None:
    """End (SIGKILL) when the process that started this one ends, even if it already has."""
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl PDEATHSIG")
    if os.getppid() != ppid:  # it ended before the prctl took effect
        os._exit(1)


def _mode(value: str) -> bool:
    if value not in ("ro", "rw"):
        raise OSError(f"mount mode {value!r}: use ro or rw")
    return value == "ro"


def _mount_all(args: argparse.Namespace) -> None:
    """The channels' binds and grafts (under the host's tree), then the tree at /opt/ml."""
    for source, target, mode in args.bind:
        mounts.bind(source, target, _mode(mode))
    for namespace, inode, source, target, mode in args.graft:
        mounts.graft(namespace, int(inode), source, target, _mode(mode))
    if args.opt_ml is not None:
        mounts.show_opt_ml(str(args.opt_ml))
        _enter_under_opt_ml(args.opt_ml)


def _enter_under_opt_ml(root: Path) -> None:
    """A working directory inside the tree is seen, and named, under /opt/ml from now on."""
    try:
        relative = Path(os.getcwd()).relative_to(root)
    except ValueError:
        return
    seen = mounts.OPT_ML / relative
    os.chdir(seen)
    os.environ["PWD"] = str(seen)  # what a shell's pwd prints


def _has_entries(path: Path) -> int:
    """0 when ``path`` lists entries, 3 when it lists none, 1 when it cannot be listed (a view
    whose storage refuses, say: not to be reported as an empty one)."""
    try:
        with os.scandir(path) as entries:
            found = next(entries, None) is not None
    except OSError as exc:
        print(f"trainops: cannot list {path}: {exc.strerror}", file=sys.stderr)
        return 1
    if not found:
        print(f"trainops: {path} is empty", file=sys.stderr)
    return 0 if found else 3


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.die_with_parent is not None:
            _die_with_parent(args.die_with_parent)
        _enter(args.hostname, args.hosts_file)
        _mount_all(args)
    except (OSError, ValueError) as exc:
        print(f"trainops: cannot give this host its own namespace: {exc}", file=sys.stderr)
        return 1
    if args.probe:
        return 0
    if args.expect_entries is not None:
        return _has_entries(args.expect_entries)
    unresolved = _wait_for_names(args.resolve)
    if unresolved is not None:
        print(
            f"trainops: host name {unresolved!r} did not resolve within {RESOLVE_SECONDS:g} s",
            file=sys.stderr,
        )
        return NAME_UNRESOLVED
    return _exec(parser, args.command)


def _exec(parser: argparse.ArgumentParser, words: list[str]) -> int:
    command = words[1:] if words[:1] == ["--"] else words
    if not command:
        parser.error("no command to run")
    try:
        os.execvp(command[0], command)  # noqa: S606 (an argv list, never a shell string)
    except OSError as exc:  # as a shell says it: the program is missing or not runnable
        print(f"trainops: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
