"""No process a job started outlives it: a ``setsid`` daemon of the script is killed at its end.

Both nets are tried on real processes: the environment-marker sweep (which must work
everywhere) and the cgroup v2 (where this machine lets the agent create one).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from trainops.agent import ScriptProcess
from trainops.agent.supervision._reaper import MARKER_VARIABLE, ProcessTree

# The script double-forks a daemon in a session of its own that keeps the script's stdout and
# stderr open and sleeps; the daemon prints its pid, then the script exits at once.
DAEMONIZE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        print("daemon", os.getpid(), flush=True)
        time.sleep(300)
    os._exit(0)
os.wait()
time.sleep(0.3)
print("script done", flush=True)
"""


def _daemon_pid(lines: list[str]) -> int:
    return next(int(line.split()[1]) for line in lines if line.startswith("daemon "))


def gone(pid: int, within: float = 5.0) -> bool:
    """No such process (or only its zombie, waiting for an init that does not reap) within
    ``within`` seconds: a killed process takes a moment to go."""
    deadline = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _cgroup_possible() -> bool:
    tree = ProcessTree("trainops/probe", use_cgroup=True)
    possible = tree.cgroup is not None
    tree.kill_all()
    return possible


@pytest.mark.parametrize("use_cgroup", [False, True], ids=["marker-sweep", "cgroup"])
def test_a_setsid_daemon_of_the_script_is_killed_when_it_ends(
    tmp_path: Path, use_cgroup: bool
) -> None:
    if use_cgroup and not _cgroup_possible():
        pytest.skip("no writable cgroup v2 here: only the marker sweep can be tried")
    lines: list[str] = []
    lock = threading.Lock()

    def sink(_stream: str, batch: list[str], _ts: float) -> None:
        with lock:
            lines.extend(batch)

    process = ScriptProcess(
        [sys.executable, "-c", DAEMONIZE],
        cwd=tmp_path,
        env=dict(os.environ),
        on_line=sink,
        use_cgroup=use_cgroup,
    )
    process.start()
    assert (process._tree is not None and process._tree.cgroup is not None) == use_cgroup
    returncode = process.finish()
    assert returncode == 0
    assert "script done" in lines
    daemon = _daemon_pid(lines)
    # The daemon held the pipes: the readers ended because it was killed, not by a timeout.
    assert gone(daemon), psutil.Process(daemon).status()
    assert not any(t.is_alive() for t in process._readers)


def test_the_sweep_leaves_other_processes_alone(tmp_path: Path) -> None:
    other = psutil.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, MARKER_VARIABLE: "trainops/someone-else"},
    )
    try:
        tree = ProcessTree("trainops/mine", use_cgroup=False)
        tree.kill_all()
        assert other.is_running() and other.status() != psutil.STATUS_ZOMBIE
    finally:
        other.kill()
        other.wait()


def test_the_cgroup_of_an_agent_that_died_is_cleared_by_the_next_one(tmp_path: Path) -> None:
    if not _cgroup_possible():
        pytest.skip("no writable cgroup v2 here")
    dead = psutil.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    probe = ProcessTree("trainops/probe")
    assert probe.cgroup is not None
    orphan = probe.cgroup.parent / f"trainops-{dead.pid}-left-behind"
    probe.kill_all()
    orphan.mkdir()
    stray = psutil.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (orphan / "cgroup.procs").write_text(str(stray.pid))
        ProcessTree("trainops/next").kill_all()
        stray.wait(timeout=10)
        assert not orphan.exists()
    finally:
        if stray.poll() is None:
            stray.kill()
        with contextlib.suppress(OSError):
            orphan.rmdir()


@pytest.mark.parametrize("where", ["first", "last"])
def test_the_sweep_finds_the_marker_wherever_it_is_and_only_the_whole_of_it(where: str) -> None:
    mine = "trainops/mine"
    variants = [
        {MARKER_VARIABLE: mine},
        {MARKER_VARIABLE: f"{mine}-too"},  # a marker that starts with ours
        {"X": f"{MARKER_VARIABLE}={mine}"},  # ours inside another variable's value
        {f"Y{MARKER_VARIABLE}": mine},  # a variable whose name ends with ours
    ]
    procs = []
    try:
        for marks in variants:
            base = {"PATH": os.environ.get("PATH", "")}
            env = {**marks, **base} if where == "first" else {**base, **marks}
            procs.append(
                psutil.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
            )
        assert ProcessTree(mine, use_cgroup=False).pids() == {procs[0].pid}
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
