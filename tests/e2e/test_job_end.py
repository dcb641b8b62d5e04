"""End to end: how jobs end when their command or their server goes away.

``trainops run`` killed by SIGTERM or SIGHUP stops its job as Ctrl-C does, and a job that ends
while no server runs keeps its own end time (it is not billed for the downtime).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from tests._support.processes import assert_nothing_left
from tests.e2e._harness import CLI, Server, cli_env, describe, trainops, wait_for, write_job

pytestmark = pytest.mark.slow

TICKING = """
import time
for i in range(600):
    print("tick", i, flush=True)
    time.sleep(0.1)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_run_killed_by_a_signal_stops_its_job(tmp_path: Path, sig: signal.Signals) -> None:
    spec = write_job(
        tmp_path,
        TICKING,
        job_name="signalled",
        instance_count=2,
        stopping_condition={"grace_period_in_seconds": 2},
    )
    home = tmp_path / "home"
    with subprocess.Popen(
        [*CLI, "run", str(spec)], env=cli_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as run:
        assert run.stdout is not None
        try:
            waiting = {b"[algo-1] tick 2", b"[algo-2] tick 2"}
            for raw in run.stdout:
                waiting = {w for w in waiting if w not in raw}
                if not waiting:
                    break
            run.send_signal(sig)
            out, err = run.communicate(timeout=90)
        finally:
            if run.poll() is None:
                run.kill()
    # Not killed by the signal: the command stopped the job and reported how it ended.
    assert run.returncode == 1, (run.returncode, err)
    if sig == signal.SIGTERM:
        assert b"Stopping signalled on SIGTERM" in err and b"Traceback" not in err
        assert b"Job signalled: Stopped" in out
    job = describe("signalled", home)
    assert job["TrainingJobStatus"] == "Stopped"
    assert {h["Status"] for h in job["Hosts"]} == {"Stopped"}
    # A stopped multi-host job still has its hosts' parts merged into one model and output.
    names = {a["Name"] for a in job["Artifacts"]}
    assert {"model", "output"} <= names and not {"model_part", "output_part"} & names


WAITS_FOR_GO = """
import os, time
print("working", flush=True)
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.05)
"""


def _journaled_end(home: Path) -> float | None:
    """When the agent recorded its script's end (its journal's exit event), if it has."""
    for journal in home.rglob("journal.jsonl"):
        for line in journal.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line still being written
            if event.get("kind") == "exit":
                return float(event["ts"])
    return None


def test_a_job_that_ends_while_no_server_runs_is_billed_its_own_time(tmp_path: Path) -> None:
    home = tmp_path / "home"
    spec = write_job(
        tmp_path, WAITS_FOR_GO, job_name="unwatched", environment={"GO": str(tmp_path / "go")}
    )
    server = Server(home).start()
    try:
        submitted = trainops("submit", str(spec), home=home, **server.env())
        assert submitted.returncode == 0, submitted.stderr
        wait_for(
            lambda: "working" in trainops("logs", "unwatched", home=home, **server.env()).stdout
        )
        server.kill()  # SIGKILL: the job ends while no control plane runs
        (tmp_path / "go").touch()
        ended = wait_for(lambda: _journaled_end(home), timeout=120)
        restarted = time.time()  # the downtime lasts at least until here
        server.start()
        job = wait_for(
            lambda: (d := describe("unwatched", home, **server.env()))["TrainingEndTime"] and d,
            timeout=120,
        )
    finally:
        server.stop()
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    # The job's end is its script's, not the control plane's return: the downtime is not billed.
    end = datetime.fromisoformat(job["TrainingEndTime"]).timestamp()
    assert end == pytest.approx(ended, abs=0.001) and end < restarted
    start = datetime.fromisoformat(job["TrainingStartTime"]).timestamp()
    assert job["TrainingTimeInSeconds"] == max(1, round(end - start))
    assert job["BillableTimeInSeconds"] == job["TrainingTimeInSeconds"]


DAEMONIZE = """
import os, time, uuid
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        # a name the test can find from outside (its pid is the host's PID namespace's own)
        token = f"600.{uuid.uuid4().int % 10**9}"
        print("daemon", token, flush=True)  # it keeps the script's stdout and stderr
        os.execvp("sleep", ["sleep", token])
    os._exit(0)
os.wait()
time.sleep(0.3)
print("script done", flush=True)
"""


def test_a_daemon_of_the_script_does_not_outlive_the_job(tmp_path: Path) -> None:
    spec = write_job(tmp_path, DAEMONIZE, job_name="daemonized")
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    token = next(line.split()[-1] for line in result.stdout.splitlines() if "] daemon " in line)
    assert _sleeping(token) == []
    assert_nothing_left("daemonized", [tmp_path])
    # The job ended long before its daemon would have: the agent did not wait on the daemon's
    # end of the script's pipes (it once did) nor for the daemon itself (600 s).
    assert describe("daemonized", home)["TrainingTimeInSeconds"] < 120


def _sleeping(token: str) -> list[int]:
    """Live processes running ``sleep <token>`` (zombies, which an init may keep, are gone)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["cmdline"] == ["sleep", token] and process.info["status"] not in (
            psutil.STATUS_ZOMBIE,
            psutil.STATUS_DEAD,
        ):
            found.append(process.pid)
    return found
