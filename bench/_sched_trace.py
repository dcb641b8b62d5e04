"""Who took the CPU from a script's slow steps: the kernel's ``sched_switch`` events, read back.

A step that takes far longer than the median lost CPU to something. :class:`SchedTrace` records
every context switch while a run lasts (tracefs, root only; the buffer is this run's alone) and
:func:`stolen` says, for each slow step, how long each CPU ran something other than the script,
grouped by who it was: the uploader under test, the S3 server standing in for a remote one, or
anything else on the machine (kernel threads, the sandbox's own agent). Idle CPU time is not
counted: nothing took it.

The trace clock is ``mono``, the clock of ``time.perf_counter`` on Linux, so the script's step
marks and the events share one time line.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SchedTrace", "Switch", "parse", "stolen"]

TRACEFS = Path("/sys/kernel/tracing")
BUFFER_KB = 32768  # per CPU: several runs' worth of switches
# "  python-6145    (   6140) [001] d..2.  9825.279168: sched_switch: prev_comm=... ==> next_comm=
#   python next_pid=6146 next_prio=120"
_LINE = re.compile(
    r"^\s*(.+?)-(\d+)\s+\(\s*(\d+|-+)\)\s+\[(\d+)\]\s+\S+\s+([\d.]+): sched_switch: "
    r".* ==> next_comm=.* next_pid=(\d+) next_prio=\d+$"
)


@dataclass(frozen=True, slots=True)
class Switch:
    """CPU ``cpu`` started running thread ``next_tid`` at ``time`` (seconds, CLOCK_MONOTONIC)."""

    time: float
    cpu: int
    next_tid: int


class SchedTrace:
    """Record ``sched_switch`` events between :meth:`start` and :meth:`stop`.

    :meth:`stop` returns the switches and, for every thread seen running, its process id
    (``record-tgid``) and name, and puts tracefs back as it found it.
    """

    def __init__(self, root: Path = TRACEFS) -> None:
        self.root = root
        self._saved: dict[str, str] = {}

    @staticmethod
    def available(root: Path = TRACEFS) -> bool:
        """Whether this process may trace (tracefs mounted and writable: root)."""
        return (root / "trace").is_file() and os.access(root / "tracing_on", os.W_OK)

    def start(self) -> None:
        names = ("tracing_on", "trace_clock", "buffer_size_kb", "options/record-tgid", "set_event")
        for name in names:
            self._saved[name] = _current(self.root / name)
        self._write("tracing_on", "0")
        self._write("trace_clock", "mono")
        self._write("buffer_size_kb", str(BUFFER_KB))
        self._write("options/record-tgid", "1")
        self._write("set_event", "sched:sched_switch")
        self._write("trace", "")  # empty the buffer
        self._write("tracing_on", "1")

    def stop(self) -> tuple[list[Switch], dict[int, tuple[int, str]]]:
        self._write("tracing_on", "0")
        text = (self.root / "trace").read_text(errors="replace")
        self._write("set_event", "")
        for name, value in self._saved.items():
            if name not in ("set_event", "tracing_on"):
                with contextlib.suppress(OSError):
                    self._write(name, value)
        for event in filter(None, self._saved.get("set_event", "").splitlines()):
            self._append("set_event", event)
        with contextlib.suppress(OSError):
            self._write("tracing_on", self._saved.get("tracing_on", "1"))
        return parse(text.splitlines())

    def _append(self, name: str, value: str) -> None:
        """Add a line to a tracefs list (``open("a")`` seeks to the end: tracefs refuses)."""
        with contextlib.suppress(OSError):
            fd = os.open(self.root / name, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, (value + "\n").encode())
            finally:
                os.close(fd)

    def _write(self, name: str, value: str) -> None:
        (self.root / name).write_text(value + "\n" if value else "")


def parse(lines: Iterable[str]) -> tuple[list[Switch], dict[int, tuple[int, str]]]:
    """The switches in time order, and thread id -> (process id, name) for every thread seen
    running (each appears as the current task of the switch that ends its turn)."""
    switches: list[Switch] = []
    threads: dict[int, tuple[int, str]] = {}
    for line in lines:
        match = _LINE.match(line)
        if match is None:
            continue
        comm, tid, group, cpu, when, next_tid = match.groups()
        if group.isdigit():
            threads[int(tid)] = (int(group), comm)
        switches.append(Switch(float(when), int(cpu), int(next_tid)))
    switches.sort(key=lambda s: s.time)
    return switches, threads


def stolen(
    switches: list[Switch],
    steps: Iterable[tuple[float, float]],
    classify: Callable[[int], str],
) -> dict[str, float]:
    """Seconds each class of thread (``classify(tid)``) ran during the ``(start, end)`` steps.

    ``classify`` returns ``"script"`` and ``"idle"`` for what is not counted.
    """
    times = [s.time for s in switches]
    cpus = len({s.cpu for s in switches})
    taken: defaultdict[str, float] = defaultdict(float)
    for start, end in steps:
        for tid, seconds in _occupancy(switches, times, cpus, start, end):
            who = classify(tid)
            if who not in ("script", "idle"):
                taken[who] += seconds
    return dict(taken)


def _occupancy(
    switches: list[Switch], times: list[float], cpus: int, start: float, end: float
) -> list[tuple[int, float]]:
    """(thread, seconds) for each stretch a CPU ran that thread within [start, end]."""
    first = bisect.bisect_left(times, start)
    running: dict[int, tuple[int, float]] = {}
    index = first - 1
    while index >= 0 and len(running) < cpus:  # what each CPU was running at ``start``
        running.setdefault(switches[index].cpu, (switches[index].next_tid, start))
        index -= 1
    out = []
    for switch in switches[first:]:
        if switch.time > end:
            break
        if switch.cpu in running:
            tid, since = running[switch.cpu]
            out.append((tid, switch.time - since))
        running[switch.cpu] = (switch.next_tid, switch.time)
    out.extend((tid, end - since) for tid, since in running.values())
    return out


def _current(path: Path) -> str:
    text = path.read_text()
    if path.name == "trace_clock":  # "[local] global counter ..." -> "local"
        found = re.search(r"\[(\w[\w-]*)\]", text)
        return found.group(1) if found else "local"
    if path.name == "buffer_size_kb":
        return text.split()[0]  # "1408 (expanded: ...)" -> "1408"
    return text.strip()
