"""Enter a job host's namespaces, then exec its process (see ``agent.supervision._hostns``).

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
listed (a check, run instead of a command). ``--probe`` makes the namespaces (and the mounts
asked for) and ends: 0 when all was made, 1 when the namespaces were refused,
:data:`PROBE_NO_OPT_ML` when only the mounts were (``trainops._containment`` asks so).

A job's host is contained by two more forms (see ``trainops.agent.supervision._hostns``):

- ``--hold [the options above] [--read-only DIR …] [--mask DIR …] [--keep PATH …]
  [--keep-ro PATH …]``: the host's namespaces, made once: mount, UTS and PID (and user when not
  root). The mounts above are applied, each ``--read-only`` directory (the Python installation
  the server runs from) is bound onto itself read-only, each ``DIR`` is covered by an empty
  read-only tmpfs with only the ``PATH``s below it bound back (the user's home and
  ``$TRAINOPS_HOME`` less the host's own tree, private home and Python environment; the parent
  of the remote-shell sockets less the job's own), and, as root, ``/dev`` is cut down to the
  device nodes a container gets and ``/sys`` is read-only. Its child is the namespace's init
  (pid 1): it mounts a fresh ``/proc``, keeps only Docker's default capabilities
  (``trainops._hostns_caps``), reaps whatever is orphaned to it and never runs a script itself.
  The holder prints ``ready <init pid>`` once all is in place and lives as long as the init.
- ``--hold --run [the options above]``: the same, and once ready the holder reads a command on
  stdin (to its end; see ``_read_request``): it checks the job's host names, forks the command
  (in the PID namespace, never pid 1) with its environment, working directory and Docker's
  default capabilities, and ends as it ended, the init with it: the host's one process, started
  without a ``--join`` process of its own. Input that ends with no command leaves it holding.
- ``--join PID --ns-inode INODE [--resolve NAME …] [--opt-ml ROOT] -- argv``: one process of the
  host, run inside the namespaces of the init ``PID`` (refused when its mount namespace is no
  longer ``INODE``): it enters them, checks the job's host names, and forks ``argv`` with Docker's
  default capabilities and ``no_new_privs``; the script is therefore never pid 1 (a SIGTERM's
  default action still ends it). This process waits for it and ends as it ended (the same exit
  status, or killed by the same signal); the signals a stop sends reach the script directly (it
  is in this process's group), so this process ignores them rather than passing them twice.

It imports only the standard library: it runs before every rank's process, by path and with
``python -S`` (``trainops.agent.supervision._hostns.HOSTNS_EXEC``), so that not even the
package's own ``__init__`` is imported first.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

TYPE_CHECKING = False  # not typing's: this module imports as little as it can (see below)
if TYPE_CHECKING:
    import signal
    from collections.abc import Sequence
else:  # the C module: signal.py wraps the same in enums, and importing enum costs milliseconds
    import _signal as signal

if __package__:
    from trainops import _hostns_caps as caps
    from trainops import _hostns_mounts as mounts
else:  # run by path with -S, as the agent runs it: no package (nor site) to import first
    import _hostns_caps as caps  # type: ignore[import-not-found, no-redef]
    import _hostns_mounts as mounts  # type: ignore[import-not-found, no-redef]

__all__ = ["NAME_UNRESOLVED", "PROBE_NO_OPT_ML", "main"]

HOSTS_FILE = "/etc/hosts"
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4


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
PROBE_NO_OPT_ML = 2  # --probe's exit code when the namespaces were made but not the mounts


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    # By its soname: ctypes.util.find_library would run ldconfig, before every rank's start.
    if not _LIBC:
        _LIBC.append(ctypes.CDLL("libc.so.6", use_errno=True))
    return _LIBC[0]


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _enter(hostname: str | None, hosts_file: str | None, pids: bool = False) -> None:
    libc = _libc()
    flags = CLONE_NEWNS | CLONE_NEWUTS | (CLONE_NEWPID if pids else 0)
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        flags |= CLONE_NEWUSER  # an unprivileged user becomes root of its own namespace
    _check(libc.unshare(flags), "unshare")
    if uid != 0:
        _map_ids(uid, gid)
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    if hosts_file is not None:
        source, target = hosts_file.encode(), HOSTS_FILE.encode()
        _check(libc.mount(source, target, None, MS_BIND, None), "mount --bind /etc/hosts")
    if hostname is not None:
        name = hostname.encode()
        _check(libc.sethostname(name, len(name)), "sethostname")


def _map_ids(uid: int, gid: int) -> None:
    """In a user namespace of our own: the user stays itself (files it makes are its own)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
        with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
            handle.write(text)


def _wait_for_names(names: Sequence[str]) -> str | None:
    """The first name that does not resolve within :data:`RESOLVE_SECONDS`, else None."""
    import _socket  # the C module: socket.py (and its enums) is not needed for a look-up

    # An ASCII name is looked up as bytes: a str is encoded with the idna codec first, whose
    # import (stringprep, unicodedata) costs more than the look-up itself.

    deadline = time.monotonic() + RESOLVE_SECONDS
    delay = 0.05
    for name in names:
        while True:
            try:
                _socket.getaddrinfo(name.encode("ascii") if name.isascii() else name, None)
                break
            except (_socket.gaierror, UnicodeError):
                if time.monotonic() >= deadline:
                    return name
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
    return None


def _names_resolve(names: Sequence[str]) -> bool:
    """Whether every job host name resolves in time; says which one did not."""
    unresolved = _wait_for_names(names)
    if unresolved is not None:
        print(
            f"trainops: host name {unresolved!r} did not resolve within {RESOLVE_SECONDS:g} s",
            file=sys.stderr,
        )
    return unresolved is None


PROG = "python -m trainops._hostns_exec"
_FLAGS = ("--probe", "--hold", "--run")
_SINGLE = ("--hostname", "--hosts-file", "--opt-ml", "--expect-entries")
_NUMBERS = ("--die-with-parent", "--join", "--ns-inode")
_LISTS = {
    "--resolve": 1, "--bind": 3, "--graft": 5, "--mask": 1, "--keep": 1, "--keep-ro": 1,
    "--read-only": 1,
}  # fmt: skip


class UsageError(Exception):
    """The command line is not one this program takes (exit status 2, as argparse's)."""


class Arguments:
    """The parsed command line (by hand: argparse alone costs more than ten milliseconds of
    start-up, paid before every rank's process)."""

    def __init__(self) -> None:
        self.probe = self.hold = self.run = False
        self.hostname: str | None = None
        self.hosts_file: str | None = None
        self.opt_ml: str | None = None
        self.expect_entries: str | None = None
        self.die_with_parent: int | None = None
        self.join: int | None = None
        self.ns_inode = 0
        self.resolve: list[str] = []
        self.bind: list[list[str]] = []
        self.graft: list[list[str]] = []
        self.mask: list[str] = []
        self.keep: list[str] = []
        self.keep_ro: list[str] = []
        self.read_only: list[str] = []
        self.command: list[str] = []


def parse(argv: Sequence[str]) -> Arguments:
    """The options, then the command: after ``--``, or from the first word not an option."""
    args, words, index = Arguments(), list(argv), 0
    while index < len(words):
        word = words[index]
        if word == "--" or not word.startswith("-"):
            args.command = words[index + (word == "--") :]
            break
        name = word[2:].replace("-", "_")
        if word in _FLAGS:
            setattr(args, name, True)
            index += 1
            continue
        count = _LISTS.get(word, 1 if word in _SINGLE or word in _NUMBERS else 0)
        values = words[index + 1 : index + 1 + count]
        if count == 0:
            raise UsageError(f"unrecognized argument: {word}")
        if len(values) < count:
            raise UsageError(f"argument {word}: expected {count} argument(s)")
        if word in _LISTS:
            getattr(args, name).append(values if count > 1 else values[0])
        else:
            setattr(args, name, _number(word, values[0]) if word in _NUMBERS else values[0])
        index += 1 + count
    return args


def _number(option: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"argument {option}: invalid int value: {value!r}") from None


def _die_with_parent(ppid: int) -> None:
    """End (SIGKILL) when the process that started this one ends, even if it already has."""
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl PDEATHSIG")
    if os.getppid() != ppid:  # it ended before the prctl took effect
        os._exit(1)


def _mode(value: str) -> bool:
    if value not in ("ro", "rw"):
        raise OSError(f"mount mode {value!r}: use ro or rw")
    return value == "ro"


def _mount_all(args: Arguments) -> None:
    """The channels' binds and grafts (under the host's tree), then the tree at /opt/ml."""
    for source, target, mode in args.bind:
        mounts.bind(source, target, _mode(mode))
    for namespace, inode, source, target, mode in args.graft:
        mounts.graft(namespace, int(inode), source, target, _mode(mode))
    if args.opt_ml is not None:
        mounts.show_opt_ml(args.opt_ml)
        _enter_under_opt_ml(args.opt_ml)


def _enter_under_opt_ml(root: str) -> None:
    """A working directory inside the tree is seen, and named, under /opt/ml from now on."""
    cwd, root = os.getcwd(), os.path.normpath(root)
    if cwd != root and not cwd.startswith(root.rstrip("/") + "/"):
        return
    seen = os.path.join(mounts.OPT_ML, os.path.relpath(cwd, root)).removesuffix("/.")
    os.chdir(seen)
    os.environ["PWD"] = seen  # what a shell's pwd prints


def _has_entries(path: str) -> int:
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
    try:
        return _run(parse(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


def _run(args: Arguments) -> int:
    if args.join is not None:
        return _join(args.join, args)
    if args.hold:
        return _hold(args)
    try:
        if args.die_with_parent is not None:
            _die_with_parent(args.die_with_parent)
        _enter(args.hostname, args.hosts_file, pids=args.probe)
    except (OSError, ValueError) as exc:
        print(f"trainops: cannot give this host its own namespace: {exc}", file=sys.stderr)
        return 1
    try:
        _mount_all(args)
    except (OSError, ValueError) as exc:
        print(f"trainops: cannot give this host its own namespace: {exc}", file=sys.stderr)
        return PROBE_NO_OPT_ML if args.probe else 1  # the probe's: namespaces, but no /opt/ml
    if args.probe:
        return 0
    if args.expect_entries is not None:
        return _has_entries(args.expect_entries)
    if not _names_resolve(args.resolve):
        return NAME_UNRESOLVED
    return _exec(args.command)


def _exec(command: list[str]) -> int:
    if not command:
        raise UsageError("no command to run")
    try:
        os.execvp(command[0], command)  # noqa: S606 (an argv list, never a shell string)
    except OSError as exc:  # as a shell says it: the program is missing or not runnable
        print(f"trainops: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127


# --hold: the host's namespaces and their init ------------------------------------------------

DEVICES = (
    "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts", "shm", "mqueue",
    "hugepages", "fd", "stdin", "stdout", "stderr", "core", "fuse", "infiniband", "dri", "kfd",
)  # fmt: skip
DEVICE_PREFIXES = ("nvidia", "neuron")


def _hold(args: Arguments) -> int:
    """Make the host's namespaces, start their init, say ``ready <pid>`` and wait for it."""
    try:
        if args.die_with_parent is not None:
            _die_with_parent(args.die_with_parent)
        as_root = os.getuid() == 0
        _enter(args.hostname, args.hosts_file, pids=True)
        _mount_all(args)
        mounts.protect(args.read_only)
        kept_ro = args.keep_ro + args.read_only  # a protected path under a mask: shown, read-only
        keeps = [(p, False) for p in args.keep] + [(p, True) for p in kept_ro]
        if as_root:  # a user's own namespace cannot open the machine's devices or write /sys
            args.mask.append("/dev")
            keeps += [(f"/dev/{name}", False) for name in _devices()]
        mounts.mask_all(args.mask, keeps)
        if as_root:
            mounts.make_read_only("/sys")
    except (OSError, ValueError) as exc:
        print(f"trainops: cannot give this host its own namespace: {exc}", file=sys.stderr)
        return 1
    for sig in STOP_SIGNALS:  # only SIGKILL (the agent's close, or its death) ends it
        signal.signal(sig, signal.SIG_IGN)
    ready_read, ready_write = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(ready_read)
        _init(ready_write)  # never returns
    os.close(ready_write)
    started = os.read(ready_read, 1) == b"r"
    os.close(ready_read)
    if started:
        print(f"ready {init}", flush=True)
        request = _read_request() if args.run else None
        if request is not None:
            return _run_held(args, *request)
    _, status = os.waitpid(init, 0)
    return os.waitstatus_to_exitcode(status) if started else 1


# --hold --run: the host's one process, started by the holder itself -------------------------

MAX_REQUEST = 16 * 1024 * 1024


def _read_request() -> tuple[list[str], dict[str, str], str, list[str], str] | None:
    """The command sent on stdin, read to its end (``None`` at an end with none: the host
    runs its processes by ``--join``): NUL-separated, the working directory, the cgroup to
    start it in (empty: this process's own), the number of host names to resolve and of
    arguments, those, then the environment's ``NAME=value``s."""
    chunks, size = [], 0
    while chunk := os.read(0, 65536):
        size += len(chunk)
        if size > MAX_REQUEST:
            raise UsageError("the command on stdin is larger than 16 MiB")
        chunks.append(chunk)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the script's stdin, as a joined process's: never the request pipe
    os.close(null)
    if not chunks:
        return None
    words = [os.fsdecode(w) for w in b"".join(chunks).split(b"\0")]
    try:
        cwd, cgroup, names, count = words[0], words[1], int(words[2]), int(words[3])
    except (IndexError, ValueError):
        raise UsageError("the command on stdin is not one the agent sends") from None
    if names < 0 or count < 1:
        raise UsageError("the command on stdin is not one the agent sends")
    resolve, argv = words[4 : 4 + names], words[4 + names : 4 + names + count]
    pairs = [w.partition("=") for w in words[4 + names + count :]]
    if len(resolve) != names or len(argv) != count or any(not sep for _n, sep, _v in pairs):
        raise UsageError("the command on stdin is not one the agent sends")
    return argv, {name: value for name, _sep, value in pairs}, cwd, resolve, cgroup


def _run_held(
    args: Arguments,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    resolve: list[str],
    cgroup: str,
) -> int:
    """As ``--join`` does, without a process of its own: the holder, already in the host's
    namespaces, checks the host names, forks the script (its next child: in the PID
    namespace, never its pid 1; born in ``cgroup`` where one is named) and ends as the script
    ends; the init goes with it."""
    if not _names_resolve(resolve):
        return NAME_UNRESOLVED
    child = _fork_into(cgroup)
    if child == 0:
        try:
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            os.environ["PWD"] = cwd
            if args.opt_ml is not None:
                _enter_under_opt_ml(args.opt_ml)
        except OSError as exc:
            print(f"trainops: cannot enter {cwd}: {exc.strerror or exc}", file=sys.stderr)
            os._exit(1)
        _run_contained(argv)  # never returns
    return _end_as(_wait(child))


CLONE_INTO_CGROUP = 0x200000000
SYS_CLONE3 = 435  # the same number on every architecture (the generic table, Linux 5.3)


class _CloneArgs(ctypes.Structure):
    """``struct clone_args`` as far as its ``cgroup`` field (``CLONE_ARGS_SIZE_VER2``)."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in ("flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack",
                     "stack_size", "tls", "set_tid", "set_tid_size", "cgroup")
    ]  # fmt: skip


def _fork_into(cgroup: str) -> int:
    """``os.fork()``, the child born in the cgroup directory ``cgroup`` (``clone3`` with
    ``CLONE_INTO_CGROUP``, Linux 5.7): moving a running process between cgroups waits for an
    RCU grace period (5-20 ms), which the script's start then need not. The agent names a
    cgroup only where the kernel takes it (else it moved this process there first); should
    ``clone3`` still refuse, the child is forked here, where the agent's marker sweep finds
    what it starts."""
    if not cgroup:
        return os.fork()
    try:
        fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return os.fork()
    pid = _clone3(fd)
    if pid != 0:
        os.close(fd)  # the child's copy closes with its exec
    return pid if pid >= 0 else os.fork()


def _clone3(cgroup_fd: int) -> int:
    """``clone3`` into the cgroup of ``cgroup_fd`` as ``os.fork`` forks: with the interpreter's
    lock held through it (``PyDLL``) and its fork hooks run on either side; -1 if refused."""
    api = ctypes.PyDLL(None, use_errno=True)
    api.syscall.restype = ctypes.c_long
    args = _CloneArgs(flags=CLONE_INTO_CGROUP, exit_signal=int(signal.SIGCHLD), cgroup=cgroup_fd)
    api.PyOS_BeforeFork()
    pid = int(
        api.syscall(
            ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args))
        )
    )
    if pid == 0:
        api.PyOS_AfterFork_Child()
    else:
        api.PyOS_AfterFork_Parent()
    return pid


def _devices() -> list[str]:
    """The entries of the machine's ``/dev`` a job keeps (what a container with GPUs gets)."""
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    return [n for n in names if n in DEVICES or n.startswith(DEVICE_PREFIXES)]


def _init(ready: int) -> None:
    """pid 1 of the host's PID namespace: a fresh /proc, capabilities reduced, then reap."""
    try:
        libc = _libc()
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl PDEATHSIG")
        # Not to be traced or read (/proc/1/environ, mem) by the scripts beside it.
        _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl DUMPABLE")
        mounts.mount_proc()
        caps.contain()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        os.write(ready, b"r")
        os.close(ready)
    except OSError as exc:
        print(f"trainops: cannot start this host's init: {exc}", file=sys.stderr)
        os._exit(1)
    os.dup2(0, 2)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        _reap_all()
        signal.sigwait({signal.SIGCHLD})


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# --join: one process of the host ------------------------------------------------------------

NAMESPACES = (("user", CLONE_NEWUSER), ("mnt", CLONE_NEWNS), ("uts", CLONE_NEWUTS))
STOP_SIGNALS = (
    signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
)  # fmt: skip
DEFAULT_IN_SCRIPT = (*STOP_SIGNALS, signal.SIGPIPE, signal.SIGXFSZ)


def _join(init: int, args: Arguments) -> int:
    command = args.command
    if not command:
        raise UsageError("no command to run")
    try:
        _enter_host(init, args.ns_inode, args.opt_ml)
    except OSError as exc:
        print(f"trainops: cannot enter this host's namespace: {exc}", file=sys.stderr)
        return 1
    if not _names_resolve(args.resolve):
        return NAME_UNRESOLVED
    for sig in STOP_SIGNALS:  # they reach the script itself (see the module's doc)
        signal.signal(sig, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        _run_contained(command)  # never returns
    return _end_as(_wait(child))


def _enter_host(pid: int, inode: int, opt_ml: str | None) -> None:
    """Enter the namespaces of the host's init ``pid`` (its mount namespace must be ``inode``);
    the next child is in its PID namespace."""
    cwd = os.getcwd()
    libc = _libc()
    fds = {kind: os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
           for kind in ("user", "mnt", "uts", "pid")}  # fmt: skip
    try:
        if os.fstat(fds["mnt"]).st_ino != inode:
            raise OSError(f"process {pid} is no longer this host's init")
        own_user = os.stat("/proc/self/ns/user").st_ino
        for kind, flag in NAMESPACES:
            if kind != "user" or os.fstat(fds[kind]).st_ino != own_user:
                _check(libc.setns(fds[kind], flag), f"setns {kind}")
        _check(libc.setns(fds["pid"], CLONE_NEWPID), "setns pid")
    finally:
        for fd in fds.values():
            os.close(fd)
    os.chdir(cwd)  # entering a mount namespace moved us to its root
    os.environ["PWD"] = cwd
    if opt_ml is not None:
        _enter_under_opt_ml(opt_ml)


def _run_contained(command: list[str]) -> None:
    """In the forked child: the script with Docker's default capabilities, exec'd."""
    try:
        for sig in DEFAULT_IN_SCRIPT:
            signal.signal(sig, signal.SIG_DFL)
        caps.contain()
        os.execvp(command[0], command)  # noqa: S606 (an argv list, never a shell string)
    except OSError as exc:
        print(f"trainops: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
    os._exit(127)


def _wait(child: int) -> int:
    while True:
        pid, status = os.waitpid(child, 0)
        if pid == child:
            return status


def _end_as(status: int) -> int:
    """End as the script ended: killed by the same signal, or with its exit status."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # their action cannot be changed
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
