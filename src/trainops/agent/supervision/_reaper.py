"""Every process a job's command started, so that none outlives the job.

A script may start children that leave its process group: a daemon (``setsid`` and a double
fork) survives a ``killpg`` of the script's session. Two nets catch those:

- a cgroup v2 of its own, where the agent may create one (under the agent's own cgroup on a
  writable cgroup2 mount): the script is moved into it right after it starts (or is forked
  straight into it by the host's namespace holder), and at the end
  every process still in it is killed (``cgroup.kill``, or one by one on kernels without it);
- always, the environment marker: the command runs with ``TRAINOPS_PROCESS_MARKER`` set to a
  value unique to this host and run, every process it starts inherits it, and a sweep over the
  processes of the same user kills those that carry it. A process that drops its environment
  (``env -i``) escapes this net, not the cgroup's.

A child forked in the instant between the script's start and its move into the cgroup is not in
the cgroup but still carries the marker. A cgroup is named after its agent's pid
(``trainops-<pid>-<marker>``): the next agent to create one kills and removes those whose agent
died without cleaning up (killed by the backend after it ignored a stop, say).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

import psutil

__all__ = ["MARKER_VARIABLE", "ProcessTree", "new_marker", "status_number"]

MARKER_VARIABLE = "TRAINOPS_PROCESS_MARKER"
_CGROUP_REMOVE_SECONDS = 2.0
_ORPHAN_REMOVE_SECONDS = 0.5


def new_marker(*parts: object) -> str:
    """``<parts joined by '/'>/<random>``: unique to one run of one command."""
    return "/".join([*(str(p) for p in parts), secrets.token_hex(8)])


class ProcessTree:
    """The processes carrying ``marker`` (and, where possible, those in a cgroup of their own:
    :attr:`cgroup`, which a command may also be forked straight into, see ``clone3``'s
    ``CLONE_INTO_CGROUP``)."""

    def __init__(self, marker: str, *, use_cgroup: bool = True) -> None:
        self.marker = marker
        self.cgroup: Path | None = _create_cgroup(marker) if use_cgroup else None

    def adopt(self, pid: int) -> None:
        """Move ``pid`` (the command, just started) into the cgroup, if there is one."""
        if self.cgroup is None:
            return
        try:
            (self.cgroup / "cgroup.procs").write_text(str(pid))
        except OSError:
            self._remove_cgroup()  # not allowed after all: the marker sweep does the work

    def signal(self, sig: signal.Signals, *, except_group: int | None = None) -> int:
        """Send ``sig`` to every process of the tree; returns how many were signalled.

        ``except_group``: a process group the caller has just signalled itself, whose members
        must not get ``sig`` a second time (a script's SIGTERM handler runs once, as under any
        other launcher).
        """
        sent = 0
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if except_group is not None and os.getpgid(pid) == except_group:
                    continue
                os.kill(pid, sig)
                sent += 1
        return sent

    def kill_all(self) -> None:
        """SIGKILL every process of the tree and remove the cgroup."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")
        self.signal(signal.SIGKILL)
        self._remove_cgroup()

    def pids(self) -> set[int]:
        """The live processes of the tree, never this agent itself."""
        found = set(_cgroup_pids(self.cgroup)) | set(_marked_pids(self.marker))
        found.discard(os.getpid())
        return found

    def _remove_cgroup(self) -> None:
        cgroup, self.cgroup = self.cgroup, None
        if cgroup is not None:
            _remove_killing(cgroup, _CGROUP_REMOVE_SECONDS)


def _remove_killing(cgroup: Path, within: float) -> None:
    """Remove ``cgroup``, killing what is left in it, trying for up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:  # a killed process leaves its cgroup a moment after the signal
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            with contextlib.suppress(OSError):
                (cgroup / "cgroup.kill").write_text("1")
            for pid in _cgroup_pids(cgroup):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)


def _marked_pids(marker: str) -> list[int]:
    """Processes of this user whose environment holds ``MARKER_VARIABLE=marker``.

    A sweep reads the environment of every process it may read (hundreds on a busy machine) and
    runs at the end of every script, so it is kept to one read per process: the owner is asked
    (a read of ``status``) only of the few whose environment holds the marker."""
    needle = f"\0{MARKER_VARIABLE}={marker}\0".encode()
    uid = os.getuid()
    own = os.getpid()
    found = []
    for pid in _all_pids():
        if pid == own:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue  # gone, or not ours to read
        if needle in b"\0" + environ + b"\0" and _real_uid(pid) == uid:
            found.append(pid)
    return found


def _all_pids() -> list[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return psutil.pids()
    return [int(name) for name in names if name.isdigit()]


def _real_uid(pid: int) -> int | None:
    """The real user id of ``pid`` (as ``ps`` shows it), or None if it is gone."""
    return status_number(pid, b"Uid:")


def status_number(pid: int | str, field: bytes) -> int | None:
    """The first number on the ``field`` line (``b"Uid:"``, ``b"Seccomp:"``) of
    ``/proc/<pid>/status`` (``pid`` may be ``"self"``), or None: gone, or no such line."""
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            for line in file:
                if line.startswith(field):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_pids(cgroup: Path | None) -> list[int]:
    if cgroup is None:
        return []
    try:
        text = (cgroup / "cgroup.procs").read_text()
    except OSError:
        return []
    return [int(line) for line in text.split() if line.isdigit()]


def _create_cgroup(marker: str) -> Path | None:
    """A new cgroup v2 below this process's own, or None where none can be made."""
    parent = _own_cgroup()
    if parent is None:
        return None
    _clear_orphans(parent)
    name = f"trainops-{os.getpid()}-" + "".join(c if c.isalnum() else "-" for c in marker)[-120:]
    path = parent / name
    try:
        path.mkdir()
    except OSError:
        return None
    if not (path / "cgroup.procs").exists():
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return path


def _clear_orphans(parent: Path) -> None:
    """Kill and remove the cgroups of agents that died before they could (``trainops-<pid>-``)."""
    for cgroup in parent.glob("trainops-*"):
        owner = cgroup.name.split("-")[1]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            _remove_killing(cgroup, _ORPHAN_REMOVE_SECONDS)  # else a later agent tries again


def _own_cgroup() -> Path | None:
    """Where this process's cgroup v2 lives in the file system, if a cgroup2 mount shows it."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    own = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
    mount = next((m.split()[1] for m in mounts if m.split()[2:3] == ["cgroup2"]), None)
    if own is None or mount is None:
        return None
    path = Path(mount) / own.lstrip("/")
    return path if path.is_dir() else None
