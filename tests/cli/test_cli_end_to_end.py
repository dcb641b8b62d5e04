"""The ``trainops`` commands end to end: real CLI processes, real servers, real jobs.

``run`` is driven as a subprocess (output, exit code, Ctrl-C); the read-only commands run in
this process against the same ``TRAINOPS_HOME``, each starting (or attaching to) a server.
"""

# The expected output holds the real multiplication sign the CLI prints.
# ruff: noqa: RUF001

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._harness import CLI, cli_env, free_port, trainops, wait_for, write_job
from tests.server.aws.test_schema import describe_errors
from trainops import ServerError
from trainops.cli import main
from trainops.client import Client

pytestmark = pytest.mark.slow

HELLO = """
print("hello from the script")
print("loss=0.50")
print("loss=0.25", flush=True)
"""
TICKING = """
import time
for i in range(3000):
    print("tick", i, flush=True)
    time.sleep(0.05)
"""
METRICS = [{"name": "loss", "regex": "loss=([0-9.]+)"}]
TRANSITION = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (\w+): .+$")


def _run_until(process: subprocess.Popen[str], text: str) -> list[str]:
    """Read the process's stdout until a line contains ``text``; returns the lines read."""
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line.rstrip("\n"))
        if text in line:
            return seen
    raise AssertionError(f"{text!r} never printed; got {seen}")


@pytest.fixture
def ticking_spec(tmp_path: Path) -> Path:
    return write_job(tmp_path / "ticking", TICKING, base_job_name="ticking")


@pytest.fixture
def running(ticking_spec: Path, trainops_home: Path) -> Iterator[subprocess.Popen[str]]:
    """``trainops run`` of a long job under its own embedded server, started and ticking."""
    process = subprocess.Popen(
        [*CLI, "run", str(ticking_spec)],
        env=cli_env(trainops_home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=60)


@pytest.fixture
def server_url(trainops_home: Path, tmp_path: Path) -> Iterator[str]:
    """A `trainops server` process on a free loopback port."""
    port = free_port()
    with (tmp_path / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [*CLI, "server", "--port", str(port)],
            env=cli_env(trainops_home),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(lambda: _healthy(url), timeout=30)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)


def _healthy(url: str) -> bool:
    try:
        with Client(url) as client:
            return client.health()["status"] == "ok"
    except ServerError:
        return False


def test_run_shows_transitions_log_and_summary(tmp_path: Path, trainops_home: Path) -> None:
    spec = write_job(tmp_path, HELLO, job_name="hello", metric_definitions=METRICS)
    result = trainops("run", str(spec), home=trainops_home)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout.splitlines()
    assert out[0] == "Submitted hello"
    statuses = [m.group(1) for line in out if (m := TRANSITION.match(line))]
    assert statuses[0] == "Starting" and statuses[-1] == "Completed"
    # The script's lines come after Training started and before the upload.
    assert out.index("[algo-1] hello from the script") > _index(out, " Training: ")
    assert out.index("[algo-1] hello from the script") < _index(out, " Uploading: ")
    summary = out[out.index("Job hello: Completed") :]
    assert summary[1:3] == ["Final metrics:", "  loss  0.25"]
    assert any(re.match(r"^  model +file://.*/hello/output/model\.tar\.gz$", s) for s in summary)
    assert any(re.match(r"^Time: training \d+ s, billable \d+ s$", s) for s in summary)
    assert re.match(
        r"^Cost: ≈ \$0\.\d+ \(ml\.m5\.large × 1 at \$0\.115/h, prices as of \d{4}-\d\d-\d\d\)$",
        summary[-1],
    )


def _index(lines: list[str], fragment: str) -> int:
    return next(i for i, line in enumerate(lines) if fragment in line)


def test_read_commands_after_a_run(
    tmp_path: Path, trainops_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_job(tmp_path, HELLO, job_name="done", metric_definitions=METRICS)
    assert trainops("run", str(spec), home=trainops_home).returncode == 0

    assert main(["jobs", "--status", "Completed"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "SECONDARY", "CREATED", "INSTANCES"]
    assert table[1].split()[:3] == ["done", "Completed", "Completed"]
    assert main(["jobs", "--status", "Failed"]) == 0
    assert capsys.readouterr().out == "No jobs found.\n"

    assert main(["describe", "done"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["TrainingJobStatus"] == "Completed"
    # DescribeTrainingJob's shape (botocore's model), trainops' own apart: diffable with SageMaker
    assert describe_errors(described) == ""
    assert described["TrainingJobArn"].endswith(":training-job/done")
    assert described["FinalMetricDataList"][0]["MetricName"] == "loss"
    assert [h["Status"] for h in described["Trainops"]["Hosts"]] == ["Completed"]
    assert "Hosts" not in described and "Cost" in described["Trainops"]
    assert main(["describe", "done", "--rest"]) == 0
    rest = json.loads(capsys.readouterr().out)
    assert "Trainops" not in rest and rest["Hosts"] == described["Trainops"]["Hosts"]

    assert main(["logs", "done"]) == 0
    logged = capsys.readouterr().out.splitlines()
    script = [line for line in logged if "hello" in line or "loss=" in line]
    assert script == ["[algo-1] hello from the script", "[algo-1] loss=0.50", "[algo-1] loss=0.25"]
    assert main(["metrics", "done", "--csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "timestamp,metric_name,value,host"
    assert sorted(r.split(",", 1)[1] for r in rows[1:]) == ["loss,0.25,algo-1", "loss,0.5,algo-1"]

    assert main(["stop", "done"]) == 2
    assert "has already ended" in capsys.readouterr().err

    # A host or metric the job does not have is an error, not an empty answer.
    assert main(["logs", "done", "--host", "algo-1"]) == 0
    assert "[algo-1] hello from the script" in capsys.readouterr().out
    assert main(["logs", "done", "--host", "algo-9"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "trainops: error: job 'done' has no host 'algo-9'; its hosts are algo-1\n"
    assert main(["metrics", "done", "--name", "nope"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("trainops: error: job 'done' has no metric named 'nope'; its metrics are loss\n")
    assert main(["describe", "missing"]) == 2
    assert capsys.readouterr().err.startswith("trainops: error: ")


def test_failed_run_exits_1_and_says_why(tmp_path: Path, trainops_home: Path) -> None:
    spec = write_job(tmp_path, "raise SystemExit('bad learning rate')\n", job_name="broken")
    result = trainops("run", str(spec), home=trainops_home)
    assert result.returncode == 1
    assert "Job broken: Failed" in result.stdout
    reason = result.stdout.split("Failure reason:", 1)[1].split("Artifacts:", 1)[0]
    assert reason.startswith("\n  ExecuteUserScriptError:")
    assert 'ErrorMessage "bad learning rate"' in reason


def test_ctrl_c_stops_a_job_of_the_embedded_server(
    running: subprocess.Popen[str], capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _run_until(running, "[algo-1] tick 2")
    name = seen[0].removeprefix("Submitted ")
    # Another command attaches to the embedded server of the running `trainops run`.
    assert main(["logs", name]) == 0
    assert "[algo-1] tick 0" in capsys.readouterr().out
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=120)
    assert running.returncode == 1
    assert f"Stopping {name} (press Ctrl-C again to exit at once)" in err
    assert f"Job {name}: Stopped" in out
    assert "Traceback" not in err


def test_ctrl_c_detaches_from_a_configured_server(
    ticking_spec: Path,
    trainops_home: Path,
    server_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with subprocess.Popen(
        [*CLI, "run", str(ticking_spec)],
        env=cli_env(trainops_home, TRAINOPS_SERVER=server_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            name = _run_until(process, "[algo-1] tick 1")[0].removeprefix("Submitted ")
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130
    assert f"Detached; {name} keeps running. Follow it with: trainops logs -f {name}" in err
    monkeypatch.setenv("TRAINOPS_SERVER", server_url)
    capsys.readouterr()
    assert main(["stop", name, "--wait"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{name}: Stopping"
    assert out[-1] == f"{name}: Stopped"
    assert any(TRANSITION.match(line) for line in out[1:-1])
