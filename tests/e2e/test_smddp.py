"""End to end: scripts written for SageMaker's data parallel library run unchanged.

A job whose distribution is ``smdistributed.dataparallel`` (or ``pytorchddp``) finds the
library's PyTorch client importable: ``torch_smddp`` and ``init_process_group(backend="smddp")``
(the library's API since 1.4.0), and its older ``smdistributed.dataparallel.torch.distributed``
with its ``DistributedDataParallel``. On this machine the backend runs over gloo; on a GPU it
runs over NCCL (tests/gpu). A job without that distribution does not find the library, as a
script on SageMaker outside its data parallel runner would not launch it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests._support.system import require_extra
from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow
torch = require_extra("torch")

# _TEARDOWN: the scripts leave with os._exit once their work is done and printed. torch 2.13's
# gloo aborts at interpreter exit now and then ("terminate called without an active exception",
# SIGABRT on rank 0): 1 to 5 runs in 30 of a bare two-rank gloo script under torchrun, with or
# without destroy_process_group(), outside trainops too. That is not what these tests are about.

# As the library's guide for PyTorch writes a script (smd_data_parallel_pytorch.rst, "latest").
CURRENT_API = """
import os
import torch
import smdistributed.dataparallel.torch.torch_smddp
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="smddp")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)  # different starting weights: DDP must make them equal
model = DDP(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x = torch.randn(16, 8) + rank
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
weights = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(weights) for _ in range(world)]
dist.all_gather(gathered, weights)
same = all(torch.equal(gathered[0], g) for g in gathered)
print(f"rank={rank} world={world} backend={dist.get_backend()} same={same} "
      f"local={os.environ['LOCAL_RANK']} single={os.environ.get('SMDATAPARALLEL_USE_SINGLENODE')} "
      f"nccl_debug={os.environ.get('NCCL_DEBUG')}",
      flush=True)
if rank == 0:
    torch.save(model.module.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pth"))
dist.barrier()
dist.destroy_process_group()
os._exit(0)  # see _TEARDOWN
"""

# The library's API before 1.4.0 (smd_data_parallel_pytorch.rst, v1.2.x), still in examples.
OLDER_API = """
import torch
import smdistributed.dataparallel.torch.distributed as dist
from smdistributed.dataparallel.torch.parallel.distributed import DistributedDataParallel as DDP

dist.init_process_group()
rank, world, local = dist.get_rank(), dist.get_world_size(), dist.get_local_rank()
torch.manual_seed(rank)
model = DDP(torch.nn.Linear(4, 1), broadcast_buffers=False)
model(torch.randn(8, 4)).sum().backward()
grad = model.module.weight.grad.clone()
dist.all_reduce(grad, op=dist.ReduceOp.AVERAGE)
mean = torch.tensor([float(rank)])
dist.all_reduce(mean, op=dist.ReduceOp.AVERAGE)
peak = torch.tensor([float(rank)])
dist.all_reduce(peak, op=dist.ReduceOp.MAX)
print(f"rank={rank} world={world} local={local} avail={dist.is_available()} "
      f"mean={mean.item():g} max={peak.item():g} "
      f"grads-equal={torch.allclose(grad, model.module.weight.grad)}", flush=True)
dist.barrier()
import os
os._exit(0)  # see _TEARDOWN
"""

ABSENT = """
try:
    import smdistributed.dataparallel.torch.torch_smddp
    print("library=present", flush=True)
except ModuleNotFoundError:
    print("library=absent", flush=True)
"""


def _run(tmp_path: Path, script: str, name: str, switch: Mapping[str, object]) -> str:
    spec = write_job(
        tmp_path,
        script,
        job_name=name,
        instance_type="ml.m5.xlarge",
        distribution={**switch, "processes_per_host": 2},
    )
    result = trainops("run", str(spec), home=tmp_path / "home", timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


@pytest.mark.parametrize(
    "switch",
    [
        # the library's MNIST example's options: mpirun's -x exports reach every rank
        {
            "smdistributed": {
                "dataparallel": {
                    "enabled": True,
                    "custom_mpi_options": "-verbose -x NCCL_DEBUG=VERSION",
                }
            }
        },
        {"pytorchddp": {"enabled": True}},
    ],
    ids=["smdistributed.dataparallel", "pytorchddp"],
)
def test_a_torch_smddp_script_trains_unchanged(tmp_path: Path, switch: dict[str, object]) -> None:
    output = _run(tmp_path, CURRENT_API, "smddp-current", switch)
    lines = sorted(re.findall(r"rank=\d .*", output))
    debug = "VERSION" if "smdistributed" in switch else None
    assert lines == [
        f"rank={r} world=2 backend=smddp same=True local={r} single=1 nccl_debug={debug}"
        for r in range(2)
    ], output
    job = describe("smddp-current", tmp_path / "home")
    assert job["TrainingJobStatus"] == "Completed"
    assert job["ModelArtifacts"]["S3ModelArtifacts"].endswith("model.tar.gz")


def test_a_script_of_the_library_s_older_api_trains_unchanged(tmp_path: Path) -> None:
    switch = {"smdistributed": {"dataparallel": {"enabled": True}}}
    output = _run(tmp_path, OLDER_API, "smddp-older", switch)
    lines = sorted(re.findall(r"rank=\d .*", output))
    assert lines == [
        f"rank={r} world=2 local={r} avail=True mean=0.5 max=1 grads-equal=True" for r in range(2)
    ], output
    assert "Warning" not in output, output  # nothing the shim passes on makes torch warn


def test_without_the_data_parallel_runner_the_library_is_not_there(tmp_path: Path) -> None:
    output = _run(tmp_path, ABSENT, "smddp-absent", {})
    assert output.count("library=absent") == 2 and "library=present" not in output, output
