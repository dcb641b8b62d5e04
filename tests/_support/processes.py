"""A job's processes, found by what really marks them, for the suite's "nothing left running"
checks.

A script's command line rarely names its job or its folder (``python train.py``, a daemon's
``python -c ...``), so matching command lines finds nothing while a job's processes run. What
does mark them (see ``trainops.agent.supervision._reaper``):

- the environment: every process a job's command starts inherits ``TRAINOPS_PROCESS_MARKER``,
  ``<job>/attempt-<n>/<host>/<random>``; an agent's own environment names its job
  (``TRAINOPS_AGENT_JOB``);
- the cgroup the agent makes for a command where it can, ``trainops-<agent pid>-<marker>``
  (which also holds a process that dropped its environment);
- the working directory, under the job's tree (a script runs in its ``code`` folder).

:func:`job_processes` lists the live processes that carry any of these for one job;
:func:`assert_nothing_left` waits (with a generous deadline) until there are none, and fails
naming each one left and what marks it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from trainops.agent.supervision._reaper import MARKER_VARIABLE
from trainops.protocol._launch import ENV_JOB

__all__ = ["JobProcess", "assert_nothing_left", "host_agent", "job_processes"]


@dataclass(frozen=True)
class JobProcess:
    """A live process of a job, and what marks it as the job's."""

    pid: int
    marks: tuple[str, ...]
    cmdline: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({', '.join(self.marks)}): {self.cmdline}"


def job_processes(job: str, trees: Iterable[Path] = ()) -> list[JobProcess]:
    """The live processes (zombies aside) of ``job``: its marker or agent variable in their
    environment, in a cgroup the agent made for it, or working in one of ``trees``; never
    this process or its ancestors."""
    roots = [Path(os.path.realpath(tree)) for tree in trees]
    me = psutil.Process()
    mine = {me.pid, *(p.pid for p in me.parents())}
    found = []
    for proc in psutil.process_iter():
        if proc.pid in mine:
            continue
        marks = _marks(proc.pid, job, roots)
        if marks and _alive(proc):
            found.append(JobProcess(proc.pid, marks, _cmdline(proc)))
    return found


def assert_nothing_left(job: str, trees: Iterable[Path] = (), *, within: float = 60.0) -> None:
    """Wait until ``job`` has no process left (up to ``within`` s: a killed process takes a
    moment to go); else fail naming those left."""
    roots = list(trees)
    deadline = time.monotonic() + within
    while left := job_processes(job, roots):
        if time.monotonic() > deadline:
            shown = "\n".join(f"  {p}" for p in left)
            raise AssertionError(f"processes of job {job!r} left running:\n{shown}")
        time.sleep(0.2)


def _marks(pid: int, job: str, roots: list[Path]) -> tuple[str, ...]:
    marks = []
    environ = _environ(pid)
    if environ.get(MARKER_VARIABLE, "").startswith(f"{job}/attempt-"):
        marks.append(f"{MARKER_VARIABLE}={environ[MARKER_VARIABLE]}")
    if environ.get(ENV_JOB) == job:
        marks.append(f"{ENV_JOB}={job}")
    cgroup = _cgroup(pid)
    if _cgroup_of(cgroup, job):
        marks.append(f"cgroup {cgroup}")
    cwd = _cwd(pid)
    if cwd is not None and any(cwd.is_relative_to(root) for root in roots):
        marks.append(f"cwd {cwd}")
    return tuple(marks)


def _cgroup_of(cgroup: str, job: str) -> bool:
    """Whether ``cgroup`` is one an agent made for a command of ``job``: ``_reaper`` names it
    ``trainops-<agent pid>-`` and the marker ``<job>/attempt-<n>/<host>/<16 hex>`` with every
    character but letters and digits made ``-`` (so the whole name is matched: job ``a`` must
    not take job ``a-attempt-2``'s cgroup for its own)."""
    name = re.escape("".join(c if c.isalnum() else "-" for c in job))
    pattern = re.compile(rf"trainops-\d+-{name}-attempt-\d+-algo-\d+-[0-9a-f]{{16}}")
    return any(pattern.fullmatch(part) for part in cgroup.split("/"))


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def _cgroup(pid: int) -> str:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return ""
    return next((line[3:] for line in lines if line.startswith("0::")), "")


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()) or f"[{proc.name()}]"
    except psutil.Error:
        return "[gone]"


def host_agent(proc: psutil.Process) -> psutil.Process | None:
    """The host agent above ``proc`` (a process of a job's script): its nearest ancestor whose
    command line is the agent's and that has threads. As root, the namespace holder between
    them is forked from the agents' fork server too, so its command line is the agent's, but it
    is single-threaded; the agent reports from threads of its own."""
    for parent in proc.parents():
        try:
            if "trainops.agent" in " ".join(parent.cmdline()) and parent.num_threads() > 1:
                return parent
        except psutil.Error:
            continue
    return None
