"""Host names that resolve inside a job, without touching the machine's ``/etc/hosts``.

Scripts written for SageMaker use the names in ``SM_HOSTS`` directly (``MASTER_ADDR=algo-1``).
On the local backend every host of a job is this machine, so each host's processes run in a
private mount and UTS namespace: ``/etc/hosts`` there is the job's own file (every host name
mapped to a loopback address of its own, ``127.<job>.<host>``), and the host name is ``algo-N``,
so that gloo and NCCL advertise the host's own address. Two hosts of one job can then listen on
the same port, as real machines can, and jobs never meet (each has its own ``127.X.Y.0/24``).

Each process runs as ``python -m trainops._hostns_exec --hostname H --hosts-file F [--resolve
N …] -- argv`` (a module of its own that imports only the standard library): it enters the
namespaces, bind-mounts the file, checks that every job host name resolves (as SageMaker's
toolkit does before the script starts; bounded), and execs ``argv``. Where the
machine allows no namespaces (no root and no user namespaces) :func:`namespaces_available`
says so (``trainops._containment``'s probe), and the agent falls back to 127.0.0.1 with a
warning; a host whose holder fails although the probe allowed them does the same
(:func:`forgo_namespaces`).

The same namespace carries the host's mounts (:func:`mount_arguments`): the channels' binds (a
file-system channel, a FastFile view) and, with ``mount_opt_ml`` (the default), the host's tree
at ``/opt/ml``.

Every process of a job's host runs in them, one host or many (:class:`HostNamespace`): the
agent makes the host's namespaces once (``_hostns_exec --hold``: mount, UTS, PID, with
``$TRAINOPS_HOME`` and the other jobs' remote-shell sockets masked and a minimal init as pid 1),
and each process of the host joins them (``_hostns_exec --join``) with Docker's default
capabilities, but for a host of one process: the holder starts that one itself
(:meth:`HostNamespace.run_held`), which spares the script's start an interpreter. See
docs/isolation.md for what this hides and what it cannot.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from trainops._containment import containment
from trainops.agent.supervision._holder_fork import ForkedHolder, take_spare_holder
from trainops.agent.supervision._reaper import ProcessTree, status_number

if TYPE_CHECKING:  # the channels import this module (no cycle at run time)
    from trainops.agent.channels._base import Bind

__all__ = [
    "HOSTNS_EXEC",
    "HOSTS_FILE",
    "NO_ISOLATION",
    "HeldStart",
    "HostNamespace",
    "NamespaceError",
    "forgo_namespaces",
    "held_request",
    "hold_arguments",
    "host_addresses",
    "mount_arguments",
    "namespaces_available",
    "opt_ml_hint",
    "opt_ml_shown",
    "socket_parent",
    "unwrap",
    "wrap",
    "write_hosts_file",
]

HOSTS_FILE = Path("/etc/hosts")
# The namespace program, by path and without site: the interpreter starts before every rank.
HOSTNS_EXEC = (
    sys.executable,
    "-S",
    str(Path(__file__).resolve().parents[2] / "_hostns_exec.py"),
)
HOLD_SECONDS = 30.0  # the most a host's namespaces may take to be ready
NO_ISOLATION = (
    "this machine allows no private namespaces (needs root or unprivileged user namespaces): "
    "the job's processes run unisolated: they can see $TRAINOPS_HOME (the API token, other "
    "jobs' trees) and every process of this user, and /opt/ml is not shown"
)
_available: bool | None = None
_clone_into_cgroup: bool | None = None


class NamespaceError(RuntimeError):
    """The host's namespaces could not be made; the message says why."""


class HostNamespace:
    """A job host's namespaces, held by ``_hostns_exec --hold`` while the host runs; each of
    the host's processes joins them (:meth:`join`). :meth:`close` ends them, and with them
    every process still inside. :meth:`start` only starts the holder (the agent does that
    early, beside its other preparations); :meth:`ready` waits until they are in place."""

    def __init__(self, holder: subprocess.Popen[bytes] | ForkedHolder) -> None:
        self.holder = holder
        self._init_pid: int | None = None
        self.inode = 0

    @classmethod
    def start(cls, arguments: Sequence[str]) -> HostNamespace:
        """Start making them (``arguments``: the holder's, from :func:`hold_arguments`)."""
        argv = [*HOSTNS_EXEC, "--hold", "--run"]
        argv += ["--die-with-parent", str(os.getpid()), *arguments]
        spare = take_spare_holder()  # forked ready (see _holder_fork): no interpreter to start
        if spare is not None:
            try:
                spare.begin(argv[len(HOSTNS_EXEC) :])
                return cls(spare)
            except (OSError, ValueError):
                spare.release()
        env = {k: v for k in ("PATH", "PYTHONPATH") if (v := os.environ.get(k)) is not None}
        holder = subprocess.Popen(  # a session of its own: a signal to the agent's group
            argv,  # (a stop) must not end the namespaces under the script
            stdin=subprocess.PIPE,  # where the host's one process may be sent (run_held)
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        return cls(holder)

    @classmethod
    def hold(cls, arguments: Sequence[str]) -> HostNamespace:
        """Make them and wait until they are in place."""
        namespace = cls.start(arguments)
        namespace.ready()
        return namespace

    @property
    def init_pid(self) -> int:
        return self.ready()

    def ready(self) -> int:
        """The init's pid once the namespaces are in place; raises :class:`NamespaceError`
        (the holder's own message) if they could not be made."""
        if self._init_pid is not None:
            return self._init_pid
        holder = self.holder
        assert holder.stdout is not None and holder.stderr is not None
        if holder.stdout.closed:
            raise NamespaceError("the host's namespaces are gone")
        ready, _, _ = select.select([holder.stdout], [], [], HOLD_SECONDS)
        line = holder.stdout.readline().decode(errors="replace") if ready else ""
        if not line.startswith("ready "):
            for stream in (holder.stdin, holder.stdout):
                if stream is not None:
                    stream.close()
            holder.kill()
            with holder.stderr:
                error = holder.stderr.read().decode(errors="replace").strip()
            holder.wait()
            raise NamespaceError(error.removeprefix("trainops: ") or "it did not start in time")
        # stdout and stderr stay open: the script's own, should the holder start it (run_held)
        self._init_pid = int(line.split()[1])
        self.inode = os.stat(f"/proc/{self._init_pid}/ns/mnt").st_ino
        return self._init_pid

    def join(self, argv: Sequence[str], hosts: Sequence[str], opt_ml: Path | None) -> list[str]:
        """``argv`` run inside, once every name of ``hosts`` resolves there."""
        join = ["--join", str(self.ready()), "--ns-inode", str(self.inode)]
        join += [arg for host in hosts for arg in ("--resolve", host)]
        join += [] if opt_ml is None else ["--opt-ml", str(opt_ml)]
        return [*HOSTNS_EXEC, *join, "--", *argv]

    def run_held(self, hosts: Sequence[str]) -> HeldStart:
        """How the host's one process is started by the holder itself, already inside: no
        process joins the namespaces for it (``--join`` costs a Python start-up before the
        script). Once started, the holder ends as the script ends, and the namespaces with
        it; its stdout and stderr are the script's. For one process only (a working directory
        in the tree is seen under /opt/ml where the holder shows it there)."""
        self.ready()
        return HeldStart(self, hosts)

    def close(self) -> None:
        """End the namespaces (the init, and with it every process left in them)."""
        if self.holder.poll() is None:
            self.holder.send_signal(signal.SIGKILL)
        self.holder.wait()
        for stream in (self.holder.stdin, self.holder.stdout, self.holder.stderr):
            if stream is not None:
                stream.close()


class HeldStart:
    """The :data:`Spawn` of a host's one process started by its holder (see
    :meth:`HostNamespace.run_held`)."""

    def __init__(self, namespace: HostNamespace, hosts: Sequence[str]) -> None:
        self._namespace = namespace
        self._hosts = tuple(hosts)

    def __call__(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], tree: ProcessTree
    ) -> subprocess.Popen[bytes] | ForkedHolder:
        holder = self._namespace.holder
        assert holder.stdin is not None
        cgroup = tree.cgroup
        if cgroup is not None and not clone_into_cgroup():
            tree.adopt(holder.pid)  # before the script is forked: it starts in the cgroup
            cgroup = None
        request = held_request(argv, cwd, env, self._hosts, cgroup)
        with holder.stdin:
            holder.stdin.write(request)
        holder.stdin = None  # sent and closed: the holder's input ends with the command
        return holder


def held_request(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    hosts: Sequence[str],
    cgroup: Path | None = None,
) -> bytes:
    """The command ``_hostns_exec --hold --run`` reads on stdin (see ``_read_request`` there):
    NUL-separated words, which no argument, path or variable can hold; ``cgroup``: the one
    the holder forks it into (``clone3``), else its own. Raises ``ValueError`` for a word that
    holds one (a path or argument exec could not take either)."""
    words = [str(cwd), "" if cgroup is None else str(cgroup), str(len(hosts)), str(len(argv))]
    words += [*hosts, *argv]
    words += [f"{name}={value}" for name, value in env.items()]
    encoded = [os.fsencode(word) for word in words]
    if any(b"\0" in word for word in encoded) or any("=" in name for name in env):
        raise ValueError("an argument, path or variable of the command holds a NUL byte or '='")
    return b"\0".join(encoded)


def clone_into_cgroup() -> bool:
    """Whether a holder here can fork its script straight into a cgroup (``clone3`` with
    ``CLONE_INTO_CGROUP``): Linux 5.7 or later, and no seccomp filter (a container runtime's
    may refuse ``clone3``). Where not, the holder is moved into the cgroup before it forks."""
    global _clone_into_cgroup
    if _clone_into_cgroup is None:
        _clone_into_cgroup = _kernel_at_least(5, 7) and status_number("self", b"Seccomp:") == 0
    return _clone_into_cgroup


def _kernel_at_least(major: int, minor: int) -> bool:
    release = os.uname().release
    numbers = []
    for part in release.split("-", 1)[0].split(".")[:2]:
        if not part.isdigit():
            return False
        numbers.append(int(part))
    return len(numbers) == 2 and (numbers[0], numbers[1]) >= (major, minor)


def hold_arguments(
    hostname: str,
    hosts_file: Path,
    mounts: Sequence[str],
    masks: Sequence[Path],
    keeps: Sequence[Path],
    keeps_read_only: Sequence[Path] = (),
    read_only: Sequence[Path] = (),
) -> list[str]:
    """The holder's arguments: the host's name and hosts file, its mounts (from
    :func:`mount_arguments`), the directories to keep read-only (wherever they are), the
    directories to mask and what to keep visible below them."""
    args = ["--hostname", hostname, "--hosts-file", str(hosts_file), *mounts]
    args += [a for path in read_only for a in ("--read-only", str(path))]
    args += [a for mask in masks for a in ("--mask", str(mask))]
    args += [a for keep in keeps for a in ("--keep", str(keep))]
    return args + [a for keep in keeps_read_only for a in ("--keep-ro", str(keep))]


def socket_parent() -> Path:
    """The directory every job's remote-shell socket directory of this user is made in
    (``<tmp>/trainops-rsh-<uid>``, 0700): one place, so that a job's namespace can mask the
    sockets of every other job, also of jobs started after it."""
    parent = Path(tempfile.gettempdir()) / f"trainops-rsh-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        parent.mkdir(mode=0o700)
    try:  # never through a link: opened as the directory itself, checked and mended by its fd
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise OSError(
            f"{parent} is not a directory of this user ({exc.strerror}): remove it"
        ) from None
    try:
        _keep_private(fd, parent)
    finally:
        os.close(fd)
    return parent


def _keep_private(fd: int, parent: Path) -> None:
    """Mend a socket parent of ours that others may enter (left by an older trainops, or made
    by hand under another umask): its mode made 0700 again. One of another user is refused."""
    info = os.fstat(fd)
    if info.st_uid != os.getuid():
        raise OSError(
            f"{parent} belongs to uid {info.st_uid}, not to this user ({os.getuid()}): remove it"
        )
    if info.st_mode & 0o077:
        try:
            os.fchmod(fd, 0o700)
        except OSError as exc:
            raise OSError(
                f"{parent} is open to others (mode {stat.S_IMODE(info.st_mode):04o}) and "
                f"cannot be made private ({exc.strerror}): remove it"
            ) from None


def opt_ml_hint(failure: str, shown: bool, mount_opt_ml: bool) -> str | None:
    """What to do when a script failed on a missing path under /opt/ml that the job did not
    mount (``failure``: its reason or error output), else None."""
    if shown or "/opt/ml" not in failure:
        return None
    if "FileNotFoundError" not in failure and "No such file" not in failure:
        return None
    if not mount_opt_ml:
        return (
            "the script used a path under /opt/ml, which this job does not mount: set "
            "`mount_opt_ml: true` in the job spec (or read the paths from the SM_* variables)"
        )
    return (
        "the script used a path under /opt/ml, which this machine cannot show "
        f"({containment().why or 'no private mount namespace'}); `mount_opt_ml: true` needs a "
        "machine that allows a private mount namespace (root or user namespaces) and has an "
        "/opt, or read the paths from the SM_* variables"
    )


def opt_ml_shown(mount_opt_ml: bool) -> bool:
    """Whether a job's hosts see their tree at the real /opt/ml: asked for (the default) and
    possible here (namespaces, and an ``/opt`` that can take it)."""
    return mount_opt_ml and namespaces_available() and containment().opt_ml


def host_addresses(
    job_name: str, attempt: int, hosts: Sequence[str], scope: str = ""
) -> dict[str, str]:
    """Each host's loopback address: ``127.X.Y.N`` with ``X.Y`` from the job (its name, attempt
    and ``scope``, as :func:`trainops.agent.launchers.job_port` has it), N its index."""
    slot = zlib.crc32(f"{scope}|{job_name}/{attempt}".encode()) % (254 * 256)
    x, y = 1 + slot // 256, slot % 256
    return {host: f"127.{x}.{y}.{index + 1}" for index, host in enumerate(hosts)}


def write_hosts_file(path: Path, addresses: dict[str, str]) -> Path:
    """The machine's ``/etc/hosts`` followed by the job's hosts (written atomically)."""
    try:
        base = HOSTS_FILE.read_text(encoding="utf-8")
    except OSError:
        base = "127.0.0.1\tlocalhost\n"
    lines = [base.rstrip("\n"), "# the job's hosts (trainops)"]
    lines += [f"{address}\t{host}" for host, address in addresses.items()]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def wrap(
    argv: Sequence[str],
    hostname: str | None,
    hosts_file: Path | None,
    hosts: Sequence[str],
    mounts: Sequence[str] = (),
) -> list[str]:
    """``argv`` run inside the host's namespaces by this module (``mounts``: from
    :func:`mount_arguments`)."""
    names = [] if hostname is None else ["--hostname", hostname]
    names += [] if hosts_file is None else ["--hosts-file", str(hosts_file)]
    resolve = [arg for host in hosts for arg in ("--resolve", host)]
    return [sys.executable, "-m", "trainops._hostns_exec", *names, *resolve, *mounts, "--", *argv]


def mount_arguments(binds: Sequence[Bind], opt_ml: Path | None = None) -> list[str]:
    """The arguments that give a process the channels' ``binds`` and, if ``opt_ml`` is the
    host's tree, that tree at ``/opt/ml``. Raises ``OSError`` if a grafted mount's namespace
    is gone (the process that held it ended)."""
    args: list[str] = []
    for bind in binds:
        mode = "ro" if bind.read_only else "rw"
        where = [str(bind.source), str(bind.target), mode]
        if bind.namespace is None:
            args += ["--bind", *where]
        else:
            inode = os.stat(bind.namespace).st_ino
            args += ["--graft", str(bind.namespace), str(inode), *where]
    return args + ([] if opt_ml is None else ["--opt-ml", str(opt_ml)])


def unwrap(argv: Sequence[str]) -> list[str]:
    """The command :func:`wrap` runs (``argv`` itself where it is not wrapped)."""
    wrapped = list(argv[1:3]) == ["-m", "trainops._hostns_exec"] or tuple(argv[:3]) == HOSTNS_EXEC
    if wrapped and "--" in argv:
        return list(argv[list(argv).index("--") + 1 :])
    return list(argv)


def forgo_namespaces() -> None:
    """This process makes no namespaces from now on (a holder failed here although the probe
    allowed them): every later question gets the answer of a machine without them, so the
    script's environment, /opt/ml and its launch agree."""
    global _available
    _available = False


def namespaces_available() -> bool:
    """Whether this machine lets the agent give a process its own mount and UTS namespace
    (``trainops._containment``'s probe, asked once)."""
    global _available
    if _available is None:
        _available = containment().namespaces
    return _available
