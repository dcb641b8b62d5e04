"""bench/_sched_trace.py: reading ``sched_switch`` events back and saying who ran when.

The parser and the accounting are checked on lines in the kernel's own format; the recorder
runs against the real tracefs where this process may write it (root), and leaves it as it was.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bench._load import load_bench

trace = load_bench("_sched_trace")

LINES = [
    "# tracer: nop",
    "#           TASK-PID      TGID     CPU#  |||||  TIMESTAMP  FUNCTION",
    "          python-6145    (   6140) [001] d..2.  9825.300000: sched_switch: prev_comm=python "
    "prev_pid=6145 prev_prio=120 prev_state=R ==> next_comm=tokio-rt-worker next_pid=7001 "
    "next_prio=130",
    " tokio-rt-worker-7001    (   7000) [001] d..2.  9825.400000: sched_switch: "
    "prev_comm=tokio-rt-worker prev_pid=7001 prev_prio=130 prev_state=S ==> next_comm=python "
    "next_pid=6145 next_prio=120",
    "          <idle>-0       (-------) [000] d..2.  9825.100000: sched_switch: prev_comm=swapper/0 "
    "prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=weed next_pid=8001 next_prio=120",
    "            weed-8001    (   8000) [000] d..2.  9825.350000: sched_switch: prev_comm=weed "
    "prev_pid=8001 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
    "not a trace line at all",
    "  bash-1 (1) [000] d..2.  9825.2: sched_wakeup: comm=x pid=2 prio=120 target_cpu=000",
]


def _who(tid: int) -> str:
    return {0: "idle", 6145: "script", 7001: "uploader", 8001: "server"}.get(tid, "other")


def test_switches_come_back_in_time_order_with_each_thread_s_process_and_name() -> None:
    switches, threads = trace.parse(LINES)
    assert [(s.time, s.cpu, s.next_tid) for s in switches] == [
        (9825.1, 0, 8001),
        (9825.3, 1, 7001),
        (9825.35, 0, 0),
        (9825.4, 1, 6145),
    ]
    assert threads == {
        6145: (6140, "python"),
        7001: (7000, "tokio-rt-worker"),
        8001: (8000, "weed"),
    }


def test_cpu_time_is_counted_per_class_within_the_steps_only() -> None:
    switches, _threads = trace.parse(LINES)
    # CPU 1: the uploader 9825.30-9825.40; CPU 0: the server 9825.10-9825.35, then idle.
    taken = trace.stolen(switches, [(9825.25, 9825.45)], _who)
    assert taken["uploader"] == pytest.approx(0.10)
    assert taken["server"] == pytest.approx(0.10)
    assert set(taken) == {"uploader", "server"}  # neither the script nor idle time counts
    assert trace.stolen(switches, [(9825.36, 9825.39), (9825.41, 9825.5)], _who) == {
        "uploader": pytest.approx(0.03)
    }
    assert trace.stolen(switches, [], _who) == {}


def _why_no_trace(root: Path = trace.TRACEFS) -> str:
    """Why this process cannot trace at ``root`` ("" when it can)."""
    if not (root / "trace").is_file():
        return f"tracefs is not mounted at {root} (as root: mount -t tracefs nodev {root})"
    if not trace.SchedTrace.available(root):
        return f"tracefs at {root} is writable by root only"
    return ""


def test_the_reason_a_trace_cannot_run_names_what_is_missing(tmp_path: Path) -> None:
    assert _why_no_trace(tmp_path).startswith(f"tracefs is not mounted at {tmp_path} ")
    (tmp_path / "trace").write_text("")
    (tmp_path / "tracing_on").write_text("0")
    writable = trace.SchedTrace.available(tmp_path)  # as root, always
    assert _why_no_trace(tmp_path) == (
        "" if writable else f"tracefs at {tmp_path} is writable by root only"
    )


@pytest.mark.skipif(bool(_why_no_trace()), reason=_why_no_trace() or "tracing works here")
def test_a_real_trace_sees_a_child_run_and_tracefs_is_left_as_found() -> None:
    root = trace.TRACEFS
    before = {
        name: (root / name).read_text()
        for name in ("trace_clock", "options/record-tgid", "set_event", "tracing_on")
    }
    recorder = trace.SchedTrace()
    recorder.start()
    try:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.05)"])
        child.wait()
        time.sleep(0.05)
    finally:
        switches, threads = recorder.stop()
    assert switches and all(a.time <= b.time for a, b in itertools.pairwise(switches))
    assert threads.get(child.pid, (None, ""))[0] == child.pid
    after = {name: (root / name).read_text() for name in before}
    assert after == before


@pytest.mark.skipif(bool(_why_no_trace()), reason=_why_no_trace() or "tracing works here")
def test_events_someone_else_had_set_are_set_again_after_a_trace() -> None:
    """tracefs refuses open("a") (it seeks to the end), so the restore appends with O_APPEND:
    the events set before the trace are set again after it, and only those."""
    events = trace.TRACEFS / "set_event"
    before = events.read_text()
    events.write_text("sched:sched_process_exec\n")
    try:
        recorder = trace.SchedTrace()
        recorder.start()
        recorder.stop()
        assert events.read_text() == "sched:sched_process_exec\n"
    finally:
        events.write_text(before or "\n")
