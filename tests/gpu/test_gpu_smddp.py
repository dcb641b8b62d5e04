"""On a machine with an NVIDIA GPU: a script written for SageMaker's data parallel library trains
on CUDA with the ``smddp`` backend carried by NCCL (tests/e2e/test_smddp.py runs the same APIs
over gloo on a CPU). Skipped where there is no CUDA GPU; run with ``pytest tests/gpu``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job
from tests.gpu.test_gpu_job import NEEDS_GPU

pytestmark = pytest.mark.slow

SCRIPT = """
import os
import torch
import smdistributed.dataparallel.torch.torch_smddp
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="smddp")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
carrier = type(dist.group.WORLD._get_backend(torch.device("cuda"))).__name__
model = DDP(torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10)).cuda(local_rank))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(20):
    x = torch.randn(256, 1024, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
total = torch.ones(1, device="cuda")
dist.all_reduce(total)
gathered = [torch.zeros(1, device="cuda") for _ in range(dist.get_world_size())]
dist.all_gather(gathered, total)
dist.barrier()
print(f"backend={dist.get_backend()} carrier={carrier} world={dist.get_world_size()} "
      f"allreduce={total.item():g} gathered={len(gathered)} "
      f"single={os.environ.get('SMDATAPARALLEL_USE_SINGLENODE')}", flush=True)
# no destroy_process_group(), as the library's guide writes it: the backend ends the world
"""

OLDER = """
import torch
import smdistributed.dataparallel.torch.distributed as dist
from smdistributed.dataparallel.torch.parallel.distributed import DistributedDataParallel as DDP

dist.init_process_group()
torch.cuda.set_device(dist.get_local_rank())
model = DDP(torch.nn.Linear(64, 1).cuda(dist.get_local_rank()), broadcast_buffers=False)
model(torch.randn(32, 64, device="cuda")).sum().backward()
mean = torch.tensor([3.0], device="cuda")
dist.all_reduce(mean, op=dist.ReduceOp.AVERAGE)
print(f"older world={dist.get_world_size()} mean={mean.item():g} "
      f"grad={model.module.weight.grad.is_cuda}", flush=True)
"""


@NEEDS_GPU
@pytest.mark.parametrize(
    "script,expected",
    [
        (SCRIPT, "backend=smddp carrier=ProcessGroupNCCL world=1 allreduce=1 gathered=1 single=1"),
        (OLDER, "older world=1 mean=3 grad=True"),
    ],
    ids=["torch_smddp", "older-api"],
)
def test_an_smddp_script_trains_on_the_gpu_over_nccl(
    tmp_path: Path, script: str, expected: str
) -> None:
    spec = write_job(
        tmp_path,
        script,
        job_name="smddp-on-the-gpu",
        instance_type="ml.g5.xlarge",
        distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert expected in output, output
    assert "Warning" not in output, output
    assert describe("smddp-on-the-gpu", home)["TrainingJobStatus"] == "Completed"
