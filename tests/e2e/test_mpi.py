"""End to end: mpirun across 2 hosts x 2 processes, as SageMaker's MPI runner starts it.

mpirun runs on algo-1 and starts Open MPI's daemon on algo-2 through the job's remote shell
(algo-1's agent, the control plane, algo-2's agent and its keeper); nothing may be left running
after the job, whichever way it ends.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests._support.processes import assert_nothing_left
from tests._support.system import require, require_extra
from tests.e2e._harness import CLI, cli_env, describe, trainops, write_job

pytestmark = pytest.mark.slow
require("mpirun")
require_extra("mpi")

ALLREDUCE = """
import os, socket
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
print(f"rank {comm.Get_rank()} of {comm.Get_size()} on {socket.gethostname()} sum={total}",
      flush=True)
"""

RANK_THREE_RAISES = """
import time
from mpi4py import MPI
comm = MPI.COMM_WORLD
if comm.Get_rank() == 3:
    raise RuntimeError("rank 3 ran out of data")
comm.Barrier()  # never completes: rank 3 is gone
time.sleep(3600)  # past every deadline here: only the teardown ends it
"""

SLEEPS = """
import time
from mpi4py import MPI
comm = MPI.COMM_WORLD
comm.Barrier()
print(f"rank {comm.Get_rank()} ready", flush=True)
time.sleep(600)
"""

TWO_BY_TWO = {
    "instance_count": 2,
    "distribution": {"mpi": {"enabled": True, "processes_per_host": 2}},
}


def test_mpirun_spans_two_hosts(tmp_path: Path, backend: dict[str, str]) -> None:
    spec = write_job(tmp_path, ALLREDUCE, job_name="mpi-2x2", **TWO_BY_TWO)
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, **backend)
    assert result.returncode == 0, result.stdout + result.stderr
    sums = {line for line in result.stdout.splitlines() if "sum=" in line}
    # Every rank's output reaches algo-1's log through mpirun, tagged with its rank; ranks 2
    # and 3 run on algo-2, in algo-2's namespace.
    expected = {f"[algo-1 rank {r}] rank {r} of 4 on algo-{1 + r // 2} sum=10" for r in range(4)}
    assert sums == expected, result.stdout
    assert "[algo-1] Starting on algo-2:" in result.stdout  # the remote shell at work
    assert_nothing_left("mpi-2x2", [tmp_path])


def test_a_failing_rank_on_the_other_host_fails_the_job(tmp_path: Path) -> None:
    spec = write_job(tmp_path, RANK_THREE_RAISES, job_name="mpi-fails", **TWO_BY_TWO)
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)  # ends only if torn down
    assert result.returncode == 1, result.stdout + result.stderr
    job = describe("mpi-fails", home)
    assert job["TrainingJobStatus"] == "Failed"
    reason = job["FailureReason"]
    assert reason.startswith("rank 3 on algo-2: ExecuteUserScriptError"), reason
    assert 'ErrorMessage "RuntimeError: rank 3 ran out of data"' in reason, reason
    assert "_hostns_exec" not in reason  # the command as the launcher gave it
    assert_nothing_left("mpi-fails", [tmp_path])


def test_a_stop_reaches_every_rank_on_every_host(tmp_path: Path) -> None:
    spec = write_job(tmp_path, SLEEPS, job_name="mpi-stop", **TWO_BY_TWO)
    home = tmp_path / "home"
    with subprocess.Popen(
        [*CLI, "run", str(spec)],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as run:
        assert run.stdout is not None
        ready = set()
        for line in run.stdout:
            if line.rstrip().endswith(" ready"):
                ready.add(line)
            if len(ready) == 4:
                break
        assert len(ready) == 4
        stopped = trainops("stop", "mpi-stop", home=home)
        assert stopped.returncode == 0, stopped.stderr
        run.stdout.read()
        assert run.wait(timeout=60) == 1  # not Completed
    job = describe("mpi-stop", home)
    assert job["TrainingJobStatus"] == "Stopped"
    assert {h["Status"] for h in job["Hosts"]} == {"Stopped"}
    assert_nothing_left("mpi-stop", [tmp_path])
