"""End to end: 2 hosts x 2 processes through the control plane, as a SageMaker script runs them:
ranks started by the agent (``pytorchddp``) and by torchrun (``torch_distributed``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._support.processes import assert_nothing_left
from tests._support.system import require_extra
from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow
torch = require_extra("torch")

ALLREDUCE = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")  # MASTER_ADDR=algo-1, as SageMaker's PyTorch container sets it
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"sum={t.item():g} of {dist.get_world_size()} master={os.environ['MASTER_ADDR']}", flush=True)
dist.barrier()  # leave together: gloo aborts a rank whose peers are gone
dist.destroy_process_group()
"""

RANK_THREE_RAISES = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 3:
    raise RuntimeError("rank 3 ran out of data")
print(f"rank {dist.get_rank()} entering the collective", flush=True)
dist.barrier()  # never completes: rank 3 is gone
time.sleep(600)
"""

TWO_BY_TWO = {"instance_count": 2, "distribution": {"processes_per_host": 2}}


def test_four_ranks_on_two_hosts_allreduce(tmp_path: Path, backend: dict[str, str]) -> None:
    spec = write_job(tmp_path, ALLREDUCE, job_name="ddp-2x2", **TWO_BY_TWO)
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, **backend)
    assert result.returncode == 0, result.stdout + result.stderr
    sums = {line for line in result.stdout.splitlines() if "sum=" in line}
    tags = {f"[algo-{1 + r // 2} rank {r}]" for r in range(4)}
    assert sums == {f"{tag} sum=10 of 4 master=algo-1" for tag in tags}, sums
    nodes = {host["Node"] for host in describe("ddp-2x2", home, **backend)["Hosts"]}
    assert len(nodes) == (2 if backend else 1)  # on Ray, each host on a node of its own
    assert_nothing_left("ddp-2x2", [tmp_path])


def test_one_failing_rank_ends_every_rank_on_every_host(
    tmp_path: Path, backend: dict[str, str]
) -> None:
    spec = write_job(tmp_path, RANK_THREE_RAISES, job_name="ddp-fails", **TWO_BY_TWO)
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, **backend)
    assert result.returncode == 1, result.stdout + result.stderr
    job = describe("ddp-fails", home, **backend)
    assert job["TrainingJobStatus"] == "Failed"
    reason = job["FailureReason"]
    assert reason.startswith("rank 3 on algo-2: ") and "ran out of data" in reason, reason
    ranks = {h["Host"]: {r["Rank"]: r["ExitCode"] for r in h["Ranks"]} for h in job["Hosts"]}
    assert ranks["algo-2"][3] == 1  # the rank that raised
    # every other rank was ended by the job (SIGTERM or SIGKILL), none ran on
    assert all(code not in (None, 0) for codes in ranks.values() for code in codes.values())
    assert sorted(r for codes in ranks.values() for r in codes) == [0, 1, 2, 3]
    assert_nothing_left("ddp-fails", [tmp_path])


TORCHRUN_TWO_BY_TWO = {
    "instance_count": 2,
    "distribution": {"processes_per_host": 2, "torch_distributed": {"enabled": True}},
}

RANK_THREE_RAISES_ALONE = """
import time, torch.distributed as dist
dist.init_process_group("gloo")  # its excepthook puts "[rank3]: " before each traceback line
dist.barrier()  # every rank is past the rendezvous: none fails on its own when rank 3 is gone
if dist.get_rank() == 3:
    raise RuntimeError("rank 3 ran out of data")
time.sleep(600)  # the others wait until torchrun (rank 2) or the job's stop (0, 1) ends them
"""

TAG = re.compile(r"^\[(algo-\d) rank (\d+)\]")


def _tags(output: str) -> set[tuple[str, int]]:
    return {(m[1], int(m[2])) for line in output.splitlines() if (m := TAG.match(line))}


def test_torchrun_ranks_on_two_hosts_are_tagged_with_their_global_rank(tmp_path: Path) -> None:
    spec = write_job(tmp_path, ALLREDUCE, job_name="torchrun-2x2", **TORCHRUN_TWO_BY_TWO)
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    sums = {line for line in result.stdout.splitlines() if "sum=" in line}
    assert sums == {f"[algo-{1 + r // 2} rank {r}] sum=10 of 4 master=algo-1" for r in range(4)}
    assert _tags(result.stdout) == {(f"algo-{1 + r // 2}", r) for r in range(4)}
    hosts = describe("torchrun-2x2", home)["Hosts"]
    ranks = {h["Host"]: h["Ranks"] for h in hosts}
    assert ranks == {
        "algo-1": [{"Rank": 0, "ExitCode": 0}, {"Rank": 1, "ExitCode": 0}],
        "algo-2": [{"Rank": 2, "ExitCode": 0}, {"Rank": 3, "ExitCode": 0}],
    }


def test_torchrun_names_the_rank_that_failed_not_the_one_it_ended(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path, RANK_THREE_RAISES_ALONE, job_name="torchrun-fails", **TORCHRUN_TWO_BY_TWO
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 1, result.stdout + result.stderr
    job = describe("torchrun-fails", home)
    reason = job["FailureReason"]
    assert reason.startswith("rank 3 on algo-2: "), reason
    assert 'ErrorMessage "RuntimeError: rank 3 ran out of data"' in reason, reason
    assert "SIGTERM" not in reason and "ChildFailedError" not in reason, reason
    # torch's own "[rank3]: " stays the rank's text; the tag is the global rank, on its host
    assert "[algo-2 rank 3] [rank3]: RuntimeError: rank 3 ran out of data" in result.stdout
    assert _tags(result.stdout) <= {(f"algo-{1 + r // 2}", r) for r in range(4)}
    ranks = {h["Host"]: {r["Rank"]: r["ExitCode"] for r in h["Ranks"]} for h in job["Hosts"]}
    assert ranks["algo-2"] == {2: -15, 3: 1}  # rank 2 was ended by torchrun
    assert sorted(ranks["algo-1"]) == [0, 1]
    assert_nothing_left("torchrun-fails", [tmp_path])
