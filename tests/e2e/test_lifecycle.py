"""End to end: a job's life through the real CLI, server, backend and agent.

Completed, Failed (with the script's error), Stopped, MaxRuntimeExceeded, and a hostile source
tarball that is rejected with nothing written outside the job tree.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import psutil
import pytest

from tests._support.processes import host_agent
from tests.e2e._harness import (
    CLI,
    Server,
    cli_env,
    describe,
    statuses,
    trainops,
    try_describe,
    wait_for,
    write_job,
)

pytestmark = pytest.mark.slow

HELLO = """
import json, os, sys, time
print("hello from", os.environ["SM_CURRENT_HOST"], "args", sys.argv[1:])
print("hps", os.environ["SM_HPS"])
# The two streams are read by separate threads: give the stderr point time to land first.
print("loss=0.50", file=sys.stderr, flush=True); time.sleep(0.3); print("loss=0.25", flush=True)
open(os.path.join(os.environ["SM_MODEL_DIR"], "weights.txt"), "w").write("w")
"""


def test_hello_job_completes_with_metrics_and_artifacts(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        HELLO,
        job_name="hello",
        hyperparameters={"lr": 0.1, "b": True},
        metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}],
    )
    result = trainops("run", str(spec), home=tmp_path / "home")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[algo-1] hello from algo-1 args ['-b', 'True', '--lr', '0.1']" in result.stdout
    job = describe("hello", tmp_path / "home")
    assert job["TrainingJobStatus"] == "Completed"
    assert statuses(job)[:1] == ["Starting"] and statuses(job)[-1] == "Completed"
    assert {"Downloading", "Training", "Uploading"} <= set(statuses(job))
    assert job["FinalMetricDataList"][0]["MetricName"] == "loss"
    assert job["FinalMetricDataList"][0]["Value"] == pytest.approx(0.25)
    assert job["BillableTimeInSeconds"] >= 1 and job["Cost"]["EstimatedCostUsd"] > 0
    assert job["ModelArtifacts"]["S3ModelArtifacts"].endswith("/hello/output/model.tar.gz")


def test_failing_script_reports_its_error(tmp_path: Path) -> None:
    script = "raise ValueError('learning rate must be positive')\n"
    spec = write_job(tmp_path, script, job_name="fails")
    result = trainops("run", str(spec), home=tmp_path / "home")
    assert result.returncode == 1
    job = describe("fails", tmp_path / "home")
    assert job["TrainingJobStatus"] == "Failed"
    assert "ValueError: learning rate must be positive" in job["FailureReason"]
    assert job["FailureReason"].startswith("ExecuteUserScriptError")


def test_failure_file_wins(tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "open(os.path.join(os.environ['SM_OUTPUT_DIR'], 'failure'), 'w').write('bad data in shard 3')\n"
        "sys.exit(3)\n"
    )
    spec = write_job(tmp_path, script, job_name="failfile")
    assert trainops("run", str(spec), home=tmp_path / "home").returncode == 1
    assert describe("failfile", tmp_path / "home")["FailureReason"] == "bad data in shard 3"


def test_max_runtime_stops_the_job(tmp_path: Path, backend: dict[str, str]) -> None:
    script = "import time\nprint('sleeping', flush=True)\ntime.sleep(120)\n"
    spec = write_job(
        tmp_path,
        script,
        job_name="slow",
        stopping_condition={"max_runtime_in_seconds": 2, "grace_period_in_seconds": 2},
    )
    result = trainops("run", str(spec), home=tmp_path / "home", **backend)
    assert result.returncode == 1
    job = describe("slow", tmp_path / "home", **backend)
    assert job["TrainingJobStatus"] == "Stopped"
    assert job["SecondaryStatus"] == "MaxRuntimeExceeded"


def test_stop_sends_sigterm_then_sigkill(tmp_path: Path, backend: dict[str, str]) -> None:
    home = tmp_path / "home"
    server = Server(home, **backend).start()
    try:
        script = (
            "import signal, time, os\n"
            "def term(*_):\n"
            "    print('got SIGTERM, ignoring it', flush=True)\n"
            "signal.signal(signal.SIGTERM, term)\n"
            "print('training', flush=True)\n"
            "while True: time.sleep(0.1)\n"
        )
        spec = write_job(
            tmp_path,
            script,
            job_name="stubborn",
            stopping_condition={"grace_period_in_seconds": 2},
        )
        with subprocess.Popen(
            [*CLI, "run", str(spec)],
            env=cli_env(home, **server.env()),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as run:
            try:
                wait_for(lambda: _training("stubborn", home, server))
                stopped = trainops("stop", "stubborn", "--wait", home=home, **server.env())
                assert stopped.returncode == 0, stopped.stderr
                out, _err = run.communicate(timeout=60)
            finally:
                if run.poll() is None:
                    run.kill()
        assert run.returncode == 1
        assert "got SIGTERM, ignoring it" in out
        # The stop is logged once, not at every reply of the control plane during the grace.
        assert len([ln for ln in out.splitlines() if "Stopping (" in ln]) == 1, out
        job = describe("stubborn", home, **server.env())
        assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "Stopped")
        assert "Stopping" in statuses(job)
    finally:
        server.stop()


def _training(name: str, home: Path, server: Server) -> bool:
    """True once the job's script runs and has printed its first line."""
    job = try_describe(name, home, **server.env())
    if job is None or job["SecondaryStatus"] != "Training":
        return False
    return "training" in trainops("logs", name, home=home, **server.env()).stdout


def _hostile_tarball(path: Path) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [("train.py", b"print('hi')\n"), ("../../escaped.txt", b"owned")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_hostile_source_tarball_is_rejected(tmp_path: Path) -> None:
    tarball = tmp_path / "evil" / "sourcedir.tar.gz"
    tarball.parent.mkdir()
    _hostile_tarball(tarball)
    spec = tmp_path / "job.yaml"
    spec.write_text(f"entry_point: train.py\nsource_dir: {tarball.as_uri()}\njob_name: evil\n")
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 1
    job = describe("evil", home)
    assert job["TrainingJobStatus"] == "Failed"
    assert "escaped.txt" in job["FailureReason"] and "rejected" in job["FailureReason"]
    assert not list(tmp_path.rglob("escaped.txt"))


AGENT_DIES_ON_FIRST_ATTEMPT = """
import os, time
flag = os.environ["SM_HP_FLAG"]
if not os.path.exists(flag):
    open(flag, "w").close()
    print("running attempt-1", flush=True)
    time.sleep(60)  # the test kills this host's agent now: an internal failure
print("running attempt-2", flush=True)
"""


def _kill_the_agent_of(job: str) -> bool:
    """SIGKILL the host agent of ``job``'s script (the script itself cannot reach it: it runs
    in its host's namespaces)."""
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "train.py" not in (proc.info["cmdline"] or []):
                continue
            if proc.environ().get("TRAINING_JOB_NAME") != job:
                continue
            agent = host_agent(proc)
            if agent is not None:
                agent.kill()
                return True
        except psutil.Error:
            continue
    return False


def test_internal_failure_is_retried(tmp_path: Path) -> None:
    flag = tmp_path / "first-attempt"
    spec = write_job(
        tmp_path,
        AGENT_DIES_ON_FIRST_ATTEMPT,
        job_name="retried",
        retry_strategy={"maximum_retry_attempts": 1},
        hyperparameters={"flag": str(flag)},
    )
    home = tmp_path / "home"
    with subprocess.Popen(
        [*CLI, "run", str(spec)], env=cli_env(home), stdout=subprocess.PIPE, text=True
    ) as run:
        try:
            wait_for(flag.exists)
            wait_for(lambda: _kill_the_agent_of("retried"))
            out, _ = run.communicate(timeout=240)
        finally:
            run.kill()
    assert run.returncode == 0, out
    assert "running attempt-2" in out
    job = describe("retried", home)
    assert job["Attempt"] == 2
    assert statuses(job).count("Starting") == 2
    assert "Restarting" in statuses(job)


def test_run_whose_reader_goes_away_stops_its_job(tmp_path: Path) -> None:
    script = (
        "import time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)\n"
    )
    spec = write_job(
        tmp_path, script, job_name="unread", stopping_condition={"grace_period_in_seconds": 2}
    )
    home = tmp_path / "home"
    with subprocess.Popen(
        [*CLI, "run", str(spec)], env=cli_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as run:
        assert run.stdout is not None and run.stderr is not None
        try:
            for raw in run.stdout:  # like `trainops run job.yaml | head`
                if b"[algo-1] tick 2" in raw:
                    break
            run.stdout.close()
            err = run.stderr.read().decode()
            run.wait(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
    assert run.returncode == 1
    assert "Stopping unread" in err and "Traceback" not in err
    assert describe("unread", home)["TrainingJobStatus"] == "Stopped"
