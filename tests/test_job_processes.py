"""tests/_support/processes.py, the suite's "nothing left running" check: it finds a job's
processes by what marks them (environment, cgroup, working directory), not by a command line
that never names the job, and fails when one is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests._support.processes import _cgroup_of, assert_nothing_left, job_processes
from tests.e2e._harness import CLI, cli_env, trainops, wait_for, write_job
from trainops.agent.supervision._reaper import MARKER_VARIABLE, ProcessTree

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; killed at its end, whatever happened."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait(timeout=30)


def test_a_process_carrying_the_jobs_marker_is_found_and_fails_the_check(
    started: list[subprocess.Popen[bytes]],
) -> None:
    env = dict(os.environ, **{MARKER_VARIABLE: "left/attempt-1/algo-1/0123456789abcdef"})
    started.append(subprocess.Popen(SLEEP, env=env))
    pid = started[0].pid
    [found] = job_processes("left")
    assert found.pid == pid and found.marks == (f"{MARKER_VARIABLE}={env[MARKER_VARIABLE]}",)
    assert job_processes("lef") == job_processes("left-over") == []  # the job's name, whole
    with pytest.raises(AssertionError, match=rf"job 'left' left running:\n  pid {pid} "):
        assert_nothing_left("left", within=0)
    started[0].kill()
    assert_nothing_left("left")  # ended: its zombie, not yet reaped, does not count


def test_a_process_working_in_the_jobs_tree_is_found(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    code = tmp_path / "jobs" / "cwd-only" / "algo-1" / "code"
    code.mkdir(parents=True)
    started.append(subprocess.Popen(SLEEP, cwd=code))
    assert job_processes("cwd-only") == []  # no marker, no cgroup
    [found] = job_processes("cwd-only", [tmp_path])
    assert found.pid == started[0].pid and found.marks == (f"cwd {code.resolve()}",)


def test_a_process_that_dropped_its_environment_is_found_by_its_cgroup(
    started: list[subprocess.Popen[bytes]],
) -> None:
    tree = ProcessTree("cgroup-only/attempt-2/algo-1/0123456789abcdef")
    if tree.cgroup is None:
        pytest.skip("no writable cgroup v2 here: the agent falls back on the marker")
    try:
        started.append(subprocess.Popen(SLEEP, env={}))  # as `env -i` would
        tree.adopt(started[0].pid)
        [found] = job_processes("cgroup-only")
        assert found.pid == started[0].pid
        assert found.marks == (f"cgroup {_cgroup(found.pid)}",), found
        assert "trainops-" in found.marks[0]
    finally:
        tree.kill_all()
    assert_nothing_left("cgroup-only")


def _cgroup(pid: int) -> str:
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return next(line[3:] for line in lines if line.startswith("0::"))


# A script and a daemon of it (a session of its own, a command line that names no folder), both
# running until the job is stopped.
WITH_DAEMON = """
import subprocess, sys, time, uuid
token = uuid.uuid4().hex  # pids printed here would be the host's PID namespace's own
daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", token],
                          start_new_session=True)
print(f"running {token}", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_running_jobs_processes_are_found_and_none_once_it_is_stopped(tmp_path: Path) -> None:
    spec = write_job(tmp_path, WITH_DAEMON, job_name="still-running")
    home = tmp_path / "home"
    with subprocess.Popen(
        [*CLI, "run", str(spec)], env=cli_env(home), stdout=subprocess.PIPE, text=True
    ) as run:
        assert run.stdout is not None
        try:
            line = next(ln for ln in run.stdout if "] running " in ln)
            token = line.split()[-1]
            # the daemon, seen from outside by its command line; the script is its parent
            daemon = wait_for(
                lambda: next(
                    (p.pid for p in psutil.process_iter() if _cmd(p).endswith(token)), None
                )
            )
            script = psutil.Process(daemon).ppid()
            # What the suite used to look for: a command line naming the job's folder. None does.
            named = [p.pid for p in psutil.process_iter() if str(tmp_path) in _cmd(p)]
            assert script not in named and daemon not in named
            found = wait_for(lambda: {p.pid: p for p in job_processes("still-running")})
            assert {script, daemon} <= set(found), found
            assert all(
                m.startswith(MARKER_VARIABLE) for p in (script, daemon) for m in found[p].marks[:1]
            )
            with pytest.raises(AssertionError, match=f"pid {daemon} "):
                assert_nothing_left("still-running", within=0)
        finally:
            stopped = trainops("stop", "still-running", home=home)
            run.stdout.read()
        assert stopped.returncode == 0, stopped.stderr
    assert_nothing_left("still-running", [tmp_path])


def _cmd(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def test_a_cgroup_is_the_jobs_only_when_its_whole_name_says_so() -> None:
    mine = "/system.slice/x/trainops-4242-left-attempt-1-algo-2-0123456789abcdef"
    assert _cgroup_of(mine, "left")
    assert not _cgroup_of(mine, "lef") and not _cgroup_of(mine, "left-attempt-1")
    other = (
        "/x/trainops-4242-left-attempt-2-attempt-1-algo-1-0123456789abcdef"  # job left-attempt-2
    )
    assert _cgroup_of(other, "left-attempt-2") and not _cgroup_of(other, "left")
    assert not _cgroup_of("/x/trainops-notapid-left-attempt-1-algo-1-0123456789abcdef", "left")
