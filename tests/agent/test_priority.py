"""The agent's own work goes behind the script while it runs, and gets its priority back after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Runs in a session of its own (so its autogroup is its own): a waiting thread and a child that
# stand for the agent's work, a thread kept as it is (an output reader), a child that stands for
# the script, then lower() and restore().
PROBE = """
import json, os, subprocess, sys, threading
from trainops.agent.reporting._priority import BackgroundPriority, _autogroup_nice

def nice(target):
    return os.getpriority(os.PRIO_PROCESS, target)

stop = threading.Event()
worker_thread = threading.Thread(target=stop.wait)
worker_thread.start()
reader_thread = threading.Thread(target=stop.wait)
reader_thread.start()
script = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
def seen():
    return {
        "caller": nice(threading.get_native_id()),
        "thread": nice(worker_thread.native_id),
        "reader": nice(reader_thread.native_id),
        "script": nice(script.pid),
        "worker": nice(worker.pid),
        "autogroup": _autogroup_nice(),
    }
priority = BackgroundPriority(nice=7)
before = seen()
priority.lower(script.pid, keep=[reader_thread.native_id])
lowered = seen()
priority.restore()
restored = seen()
stop.set()
for proc in (script, worker):
    proc.kill()
    proc.wait()
print(json.dumps({"before": before, "lowered": lowered, "restored": restored}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux priorities")
def test_everything_but_the_script_and_the_caller_is_lowered_then_restored() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    seen = json.loads(out.stdout)
    before, lowered, restored = seen["before"], seen["lowered"], seen["restored"]
    base = before["caller"]
    if base >= 7:
        pytest.skip("the tests already run at a lower priority than the probe's")
    assert before["thread"] == before["worker"] == before["script"] == base
    assert lowered["thread"] == lowered["worker"] == 7
    assert lowered["script"] == lowered["caller"] == lowered["reader"] == base
    if before["autogroup"] is not None:  # a kernel with autogroups: the session is lowered too
        if os.geteuid() == 0:  # (others may be refused an autogroup change)
            assert lowered["autogroup"] == 7
        assert restored["autogroup"] == before["autogroup"]
    if os.geteuid() == 0:  # raising a thread's priority back needs privileges
        assert restored["thread"] == restored["worker"] == base


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="a kernel with autogroups")
def test_a_child_in_a_session_of_its_own_gets_its_autogroup_lowered() -> None:
    from trainops.agent.reporting import _priority

    ours = _priority._autogroup_nice()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    try:
        assert _priority.lower_session(child.pid) is True
        autogroup = Path(f"/proc/{child.pid}/autogroup")
        assert _priority._autogroup_nice(autogroup) == _priority.IDLE_SESSION_NICE
        assert _priority.lower_session(child.pid) is True  # already there: nothing written
        assert _priority._autogroup_nice() == ours  # ours is untouched
    finally:
        child.kill()
        child.wait()
    assert _priority.lower_session(child.pid) is False  # gone: refused, no exception


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="a kernel with autogroups")
def test_a_child_in_the_caller_s_session_is_refused_so_the_caller_keeps_its_autogroup() -> None:
    from trainops.agent.reporting import _priority

    ours = _priority._autogroup_nice()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _priority.lower_session(child.pid) is False
        assert _priority._autogroup_nice() == ours
    finally:
        child.kill()
        child.wait()
