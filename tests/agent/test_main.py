"""``python -m trainops.agent`` as a real process against a real agent-API server on 127.0.0.1:
CPU pinning, SIGTERM as a stop, the exit code, the journal, and a failed start."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.agent._support import JobFixture, RecordingAgentApi, make_job
from trainops.agent import EventJournal
from trainops.protocol import (
    ASSIGNMENT_FILE,
    AgentLaunch,
    Assignment,
    EventKind,
    HostResources,
    agent_command,
    hand_over_assignment,
)

pytestmark = pytest.mark.slow

TOKEN = "main-test-token"
SCRIPT = """
import os, signal, sys, time
def on_term(signum, frame):
    print("terminated politely", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("affinity", sorted(os.sched_getaffinity(0)), flush=True)
print("token visible", any("main-test-token" in v for v in os.environ.values()), flush=True)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def _launch(job: JobFixture, url: str, assignment: Assignment | None = None) -> AgentLaunch:
    return AgentLaunch(
        server_url=url,
        token=TOKEN,
        job_name=job.assignment.job_name,
        host=job.assignment.current_host,
        attempt=1,
        root=job.root,
        state_dir=job.state_dir,
        assignment=assignment,
    )


def _start(job: JobFixture, url: str, home: Path) -> subprocess.Popen[bytes]:
    launch = _launch(job, url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    env.update(launch.env(), TRAINOPS_HOME=str(home))
    return subprocess.Popen(agent_command(), env=env, start_new_session=True)


def _lines(api: RecordingAgentApi) -> list[str]:
    return api.log_lines()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs CPU affinity (Linux)")
def test_sigterm_stops_the_job_and_the_agent_exits_zero(
    tmp_path: Path, trainops_home: Path
) -> None:
    job = make_job(tmp_path, {"train.py": SCRIPT}, resources=HostResources(cpus=[0]))
    with RecordingAgentApi(job.assignment, TOKEN) as api:
        agent = _start(job, api.url, trainops_home)
        try:
            api.wait_for(lambda: "ready" in _lines(api))
            agent.send_signal(signal.SIGTERM)
            assert agent.wait(timeout=120) == 0
        finally:
            agent.kill()
            agent.wait()
    [exit_event] = api.events(EventKind.EXIT)
    assert exit_event["data"]["outcome"] == "Stopped"
    assert exit_event["data"]["exit_code"] == 0
    lines = _lines(api)
    assert "affinity [0]" in lines
    assert "token visible False" in lines
    assert "terminated politely" in lines
    journal = EventJournal.read(job.state_dir / "journal.jsonl")
    assert [e.seq for e in journal] == sorted(api.stored)
    assert journal[-1].kind is EventKind.EXIT


def test_an_unknown_assignment_exits_one_with_an_internal_error(
    tmp_path: Path, trainops_home: Path
) -> None:
    job = make_job(tmp_path, {"train.py": ""})
    with RecordingAgentApi(None, TOKEN) as api:
        agent = _start(job, api.url, trainops_home)
        assert agent.wait(timeout=120) == 1
    [exit_event] = api.events(EventKind.EXIT)
    assert exit_event["data"]["outcome"] == "InternalError"
    assert "cannot fetch the assignment" in exit_event["data"]["failure_reason"]


@pytest.mark.parametrize("own", [True, False], ids=["its own", "another host's"])
def test_an_agent_runs_the_assignment_handed_over_without_asking_the_api(
    tmp_path: Path, trainops_home: Path, own: bool
) -> None:
    """The local backend writes the assignment into the agent's state directory: the agent
    runs it without the API's (this API knows none); one for another host is not taken."""
    job = make_job(tmp_path, {"train.py": "print('handed over', flush=True)"})
    job.state_dir.mkdir(parents=True, mode=0o700)
    handed = job.assignment if own else dataclasses.replace(job.assignment, current_host="algo-9")
    hand_over_assignment(_launch(job, "http://127.0.0.1:1", handed))
    with RecordingAgentApi(None, TOKEN) as api:
        agent = _start(job, api.url, trainops_home)
        assert agent.wait(timeout=120) == (0 if own else 1)
    [exit_event] = api.events(EventKind.EXIT)
    if own:
        assert exit_event["data"]["outcome"] == "Completed"
        assert "handed over" in _lines(api)
    else:
        assert "cannot fetch the assignment" in exit_event["data"]["failure_reason"]
    assert not (job.state_dir / ASSIGNMENT_FILE).exists()


def test_missing_launch_variables_are_named() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_AGENT_")}
    done = subprocess.run(agent_command(), env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "TRAINOPS_AGENT_SERVER" in done.stderr


def test_the_agent_imports_no_heavy_packages() -> None:
    heavy = ("fastapi", "httpx", "uvicorn", "obstore", "botocore", "torch", "starlette")
    probe = (
        "import sys, trainops.agent.__main__\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_an_agent_whose_parent_is_gone_abandons_its_host() -> None:
    from trainops.agent.__main__ import _watch_parent

    class Recorder:
        def __init__(self) -> None:
            self.reasons: list[str] = []

        def abandon(self, reason: str) -> None:
            self.reasons.append(reason)

    gone, kept, unwatched = Recorder(), Recorder(), Recorder()
    # A parent pid that is not ours: as if the process that started the agent had died.
    _watch_parent({"TRAINOPS_AGENT_PARENT": str(os.getppid() + 1)}, gone, "algo-2")  # type: ignore[arg-type]
    _watch_parent({"TRAINOPS_AGENT_PARENT": str(os.getppid())}, kept, "algo-1")  # type: ignore[arg-type]
    _watch_parent({}, unwatched, "algo-3")  # type: ignore[arg-type]
    deadline = time.monotonic() + 10
    while not gone.reasons and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone.reasons == [
        f"algo-2 was lost: the process that held its agent (pid {os.getppid() + 1}) is gone, "
        "with its node"
    ]
    time.sleep(0.6)  # two polls: a parent that is still there is never taken for gone
    assert kept.reasons == [] and unwatched.reasons == []


def test_the_agent_reports_at_the_configured_heartbeat_interval(tmp_path: Path) -> None:
    """``heartbeat_interval_ms`` (how soon an interruption's stop reaches the agent) is what the
    agent's reporter paces its heartbeats by."""
    from trainops._settings import Settings
    from trainops.agent.__main__ import _reporter

    launch = AgentLaunch(
        server_url="http://127.0.0.1:9",
        token=TOKEN,
        job_name="job",
        host="algo-1",
        attempt=1,
        root=tmp_path,
        state_dir=tmp_path,
    )
    env = {"TRAINOPS_HOME": str(tmp_path)}
    default = _reporter(launch, Settings.load(env), start=False)
    chosen = _reporter(
        launch, Settings.load({**env, "TRAINOPS_HEARTBEAT_INTERVAL_MS": "120"}), start=False
    )
    assert (default._heartbeat, chosen._heartbeat) == (0.5, 0.12)


LEAVING = """
import atexit, sys, threading, time, weakref
from trainops.agent.__main__ import leave

class Scratch:
    pass

scratch = Scratch()
weakref.finalize(scratch, print, "finalized")  # none of these flushes: only leave() does
atexit.register(print, "exit handler")
worker = threading.Thread(target=lambda: (time.sleep(0.2), sys.stdout.write("thread done\\n")))
worker.start()
sys.stdout.write("buffered, no newline")
sys.stderr.write("to stderr")
leave(3)
print("never reached", flush=True)
"""


def test_leaving_waits_for_threads_runs_exit_handlers_and_flushes_output() -> None:
    """The agent ends without the interpreter's teardown, yet loses nothing of an exit: a
    thread still running, an exit handler, a finalizer and output still in the buffers."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffers kept
    done = subprocess.run([sys.executable, "-c", LEAVING], capture_output=True, text=True,
                          env=env, timeout=30)  # fmt: skip
    assert done.returncode == 3, done.stderr
    # All of it sits in the buffers (stdout is a pipe: block-buffered) until leave() flushes:
    # the thread's line after the text before it, then the exit handlers, last one first.
    assert done.stdout == "buffered, no newlinethread done\nexit handler\nfinalized\n"
    assert done.stderr == "to stderr"
