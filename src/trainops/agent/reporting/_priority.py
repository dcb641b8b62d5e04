"""Keeping the agent's own work behind the training script while the script runs.

Capturing, splitting, journaling and reporting the script's output, and scanning it for metrics,
costs CPU; on a machine with few cores that CPU is taken from the script, which is what the job
is for. While the script runs, the agent therefore lowers the CPU priority of everything it does
besides starting and watching the script:

- its session's autogroup (``/proc/self/autogroup``): where the kernel groups tasks by session
  (autogroup on, no cpu cgroup), the script, which has a session of its own, competes with the
  agent's session as a whole, so only the session's nice value counts between them;
- each of its threads but the calling one and those reading the script's output (a reader
  kept waiting fills the pipe and blocks the script), and its child processes but the script
  (the metric scraping worker), by their own nice value (``setpriority`` on the thread id): what counts
  where the kernel schedules threads one by one. Threads and processes started later by a
  lowered thread inherit its value.

Once the script has exited, everything gets its priority back, so the job ends as soon as it
can. Raising a nice value back needs privileges for a thread (``CAP_SYS_NICE`` or
``RLIMIT_NICE``); without them the threads stay lowered, which only matters while something else
wants the CPU. An autogroup's value may be raised back by its owner. Every step is best effort:
a kernel without autogroups or a refused change leaves things as they were.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

__all__ = ["BOOKKEEPING_NICE", "IDLE_SESSION_NICE", "BackgroundPriority", "lower_session"]

BOOKKEEPING_NICE = 10
IDLE_SESSION_NICE = 19  # the autogroup nice of a session started for idle-priority work
_AUTOGROUP = Path("/proc/self/autogroup")
_AUTOGROUP_RETRIES = 3  # the kernel takes one autogroup change per 0.1 s from unprivileged users


class BackgroundPriority:
    """Lowers this agent's priority below a script's (:meth:`lower`) and restores it."""

    def __init__(self, nice: int = BOOKKEEPING_NICE) -> None:
        self.nice = nice
        self._lowered: list[tuple[int, int]] = []  # (thread or process id, its nice before)
        self._autogroup: int | None = None  # the autogroup's nice value before, if changed
        self._lock = threading.Lock()

    def lower(self, script_pids: int | Iterable[int], keep: Iterable[int] = ()) -> None:
        """Lower everything of this agent but the calling thread, the threads ``keep`` and the
        script's processes ``script_pids`` (one, or every rank of the host)."""
        scripts = {script_pids} if isinstance(script_pids, int) else set(script_pids)
        if not hasattr(os, "setpriority"):
            return
        kept = {threading.get_native_id(), *keep}
        targets = [tid for tid in _threads() if tid not in kept]
        targets += [pid for pid in _children() if pid not in scripts]
        for target in targets:
            before = _nice_of(target)
            if before is not None and before < self.nice and _set_nice(target, self.nice):
                self._lowered.append((target, before))
        before = _autogroup_nice()
        if before is not None and before < self.nice and _set_autogroup_nice(self.nice):
            self._autogroup = before

    def restore(self) -> None:
        """Give back what :meth:`lower` took (where the kernel lets us); thread-safe."""
        with self._lock:
            lowered, self._lowered = self._lowered, []
            autogroup, self._autogroup = self._autogroup, None
        if autogroup is not None:
            _set_autogroup_nice(autogroup)
        for target, before in lowered:
            _set_nice(target, before)


def _threads() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/task") if name.isdigit()]
    except OSError:
        return []


def _children() -> list[int]:
    """This process's children, from what each of its threads started (no scan of /proc)."""
    pids: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            text = Path(f"/proc/self/task/{tid}/children").read_text()
            pids += (int(pid) for pid in text.split())
    except FileNotFoundError:  # a kernel without the children files: ask psutil
        with contextlib.suppress(psutil.Error):
            return [child.pid for child in psutil.Process().children()]
    except (OSError, ValueError):
        pass  # a thread ended while we looked: take what was found
    return pids


def _nice_of(target: int) -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, target)
    except OSError:
        return None


def _set_nice(target: int, nice: int) -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, target, nice)
    except OSError:
        return False  # gone, or not allowed (raising a thread back needs privileges)
    return True


def lower_session(pid: int, nice: int = IDLE_SESSION_NICE) -> bool:
    """Give the session that ``pid`` leads (a child started with ``start_new_session``) the
    autogroup nice value ``nice``; False where the kernel has no autogroups or refused.

    Where autogroups are on (``/proc/sys/kernel/sched_autogroup_enabled``, the default of many
    distributions' kernels, for processes outside any cpu cgroup) the kernel first shares the CPU
    between sessions, each at its autogroup's weight, and only then between a session's threads.
    ``SCHED_IDLE`` is therefore idle only beside threads of its own session: an idle-priority
    process in another session than the script's gets half of a contended core (measured: a
    ``SCHED_IDLE`` busy loop in a session of its own took 49% of a core from a nice-0 one, 0.9%
    inside the other's session). A session of its own at autogroup nice 19 (weight 15 against the
    script's 1024) brings that back to about 1.5%.

    Only for a session leader: an autogroup belongs to the whole session, so lowering that of a
    process in the caller's session would lower the caller too. Nothing is written where the
    value is already ``nice`` (the kernel takes one change per 0.1 s from unprivileged users).
    """
    try:
        if os.getsid(pid) != (pid or os.getpid()):
            return False
    except OSError:
        return False  # gone
    path = Path(f"/proc/{pid or 'self'}/autogroup")
    return _autogroup_nice(path) == nice or _set_autogroup_nice(nice, path)


def _autogroup_nice(path: Path = _AUTOGROUP) -> int | None:
    """The autogroup nice value of the session ``path`` (a ``/proc/<pid>/autogroup``) names,
    this process's by default; None where the kernel has no autogroups."""
    try:
        text = path.read_text()  # "/autogroup-270 nice 0"
    except OSError:
        return None
    parts = text.split()
    with contextlib.suppress(IndexError, ValueError):
        if parts[1] == "nice":
            return int(parts[2])
    return None


def _set_autogroup_nice(nice: int, path: Path = _AUTOGROUP) -> bool:
    for attempt in range(_AUTOGROUP_RETRIES):
        try:
            path.write_text(str(nice))
        except BlockingIOError:  # EAGAIN: another change was made in the last 0.1 s
            time.sleep(0.05 * (attempt + 1))
        except OSError:
            return False
        else:
            return True
    return False
