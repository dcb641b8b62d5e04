"""End to end: the control plane dies while a job runs; nothing the job reported is lost."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e._harness import CLI, Server, cli_env, describe, trainops, wait_for, write_job

pytestmark = pytest.mark.slow

# Twenty lines, then (once the test has killed the control plane and says so) twenty more and
# a note that all were written: the second half is written while no control plane runs.
COUNTING = """
import os, time
for i in range(40):
    if i == 20:
        while not os.path.exists(os.environ["GO"]):
            time.sleep(0.05)
    print(f"line {i} value={i}", flush=True)
open(os.environ["GO"] + ".done", "w").close()
"""


def test_server_killed_mid_job_loses_no_record(tmp_path: Path, backend: dict[str, str]) -> None:
    home = tmp_path / "home"
    spec = write_job(
        tmp_path,
        COUNTING,
        job_name="survivor",
        metric_definitions=[{"name": "value", "regex": "value=([0-9]+)"}],
        environment={"GO": str(tmp_path / "go")},
    )
    server = Server(home, **backend).start()
    try:
        submitted = trainops("submit", str(spec), home=home, **server.env())
        assert submitted.returncode == 0, submitted.stderr
        wait_for(
            lambda: "line 5 " in trainops("logs", "survivor", home=home, **server.env()).stdout
        )
        server.kill()  # SIGKILL: no shutdown code runs
        (tmp_path / "go").touch()
        # The job keeps running and writing without a control plane, to its end.
        wait_for(lambda: (tmp_path / "go.done").exists(), timeout=120)
        server.start()
        job = wait_for(
            lambda: (
                (d := describe("survivor", home, **server.env()))["TrainingJobStatus"]
                == "Completed"
                and d
            ),
            timeout=120,
        )
        logs = trainops("logs", "survivor", home=home, **server.env()).stdout
        lines = [ln for ln in logs.splitlines() if "line " in ln and "value=" in ln]
        assert len(lines) == 40, logs
        metrics = trainops("metrics", "survivor", "--csv", home=home, **server.env()).stdout
        assert len([ln for ln in metrics.splitlines()[1:] if ln.strip()]) == 40
        assert job["FinalMetricDataList"][0]["Value"] == 39
    finally:
        server.stop()


def test_capacity_keeps_the_second_job_pending(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = Server(home, TRAINOPS_LOCAL_CPUS="2").start()
    try:
        script = "import time\ntime.sleep(2)\nprint('done', flush=True)\n"
        names = []
        for i in range(2):
            folder = tmp_path / f"job{i}"
            spec = write_job(folder, script, job_name=f"cap{i}", instance_type="ml.m5.large")
            names.append(f"cap{i}")
            run = subprocess.run(
                [*CLI, "submit", str(spec)],
                env=cli_env(home, **server.env()),
                capture_output=True,
                text=True,
            )
            assert run.returncode == 0, run.stderr
        for name in names:
            wait_for(
                lambda n=name: (
                    describe(n, home, **server.env())["TrainingJobStatus"] == "Completed"
                ),
                120,
            )
        first, second = (describe(n, home, **server.env()) for n in names)
        assert "Pending" in [t["Status"] for t in second["SecondaryStatusTransitions"]]
        assert second["TrainingStartTime"] >= first["TrainingEndTime"]
    finally:
        server.stop()
