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
says so, and the agent falls back to 127.0.0.1 with a warning.

The same namespace carries the host's mounts (:func:`mount_arguments`): the channels' binds (a
file-system channel, a FastFile view) and, with ``mount_opt_ml``, the host's tree at
``/opt/ml``. A job with mounts runs in the namespace even on a single host.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the channels import this module (no cycle at run time)
    from trainops.agent.channels._base import Bind

__all__ = [
    "HOSTS_FILE",
    "host_addresses",
    "mount_arguments",
    "namespaces_available",
    "unwrap",
    "wrap",
    "write_hosts_file",
]

HOSTS_FILE = Path("/etc/hosts")
_available: bool | None = None


def host_addresses(job_name: str, attempt: int, hosts: Sequence[str]) -> dict[str, str]:
    """Each host's loopback address: ``127.X.Y.N`` with ``X.Y`` from the job, N its index."""
    slot = zlib.crc32(f"{job_name}/{attempt}".encode()) % (254 * 256)
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
    if list(argv[1:3]) == ["-m", "trainops._hostns_exec"] and "--" in argv:
        return list(argv[list(argv).index("--") + 1 :])
    return list(argv)


def namespaces_available() -> bool:
    """Whether this machine lets the agent give a process its own mount and UTS namespace."""
    global _available
    if _available is None:
        probe = [sys.executable, "-m", "trainops._hostns_exec", "--probe"]
        try:
            done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            _available = False
        else:
            _available = done.returncode == 0
    return _available
