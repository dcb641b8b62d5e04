"""On a machine with an NVIDIA GPU: a real job trains on CUDA under trainops, with NCCL, the
system monitor reading the GPU through NVML, and a detailed profiling window tracing CUDA.

Skipped where there is no CUDA GPU (CI has none); run on a GPU machine with
``pytest tests/gpu``. Each assertion is about what the hardware path produced: NVML's columns
and the GPU's name in the monitor's meta, the GPU handed to the host (``CUDA_VISIBLE_DEVICES``,
``SM_NUM_GPUS``), an NCCL all-reduce, and kernels in the torch.profiler trace.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job
from trainops._settings import Settings
from trainops.profiler import ProfilerReader, SeriesKey, numbered
from trainops.storage import store_for

pytestmark = pytest.mark.slow


def _cuda_available() -> bool:
    if shutil.which("nvidia-smi") is None or importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


NEEDS_GPU = pytest.mark.skipif(not _cuda_available(), reason="no CUDA GPU on this machine")

SCRIPT = """
import json, os, time
import torch
import torch.distributed as dist

dist.init_process_group("nccl")
device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(device)
print("env", json.dumps({k: os.environ.get(k) for k in
      ("CUDA_VISIBLE_DEVICES", "SM_NUM_GPUS", "SM_CURRENT_HOST", "WORLD_SIZE")}), flush=True)
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 4096)).to(device)
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
end = time.time() + 4.0
step = 0
while time.time() < end or step < 12:
    x = torch.randn(2048, 4096, device=device)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
torch.cuda.synchronize()
total = torch.ones(1, device=device)
dist.all_reduce(total)
print(f"steps={step} loss={loss.item():.4f} allreduce={total.item():.0f}", flush=True)
dist.destroy_process_group()
"""


@NEEDS_GPU
def test_a_cuda_job_is_monitored_and_traced_on_the_gpu(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        SCRIPT,
        job_name="on-the-gpu",
        instance_type="ml.g5.xlarge",
        distribution={"pytorchddp": {"enabled": True}},
        profiler_config={
            "system_monitor_interval_millis": 100,
            "framework_profile_params": {
                "detailed_profiling_config": {"start_step": 5, "num_steps": 2}
            },
        },
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "allreduce=1" in output, output
    assert "Warning" not in output, output  # nothing of trainops' making in the script's log
    env = json.loads(output.split("env ", 1)[1].splitlines()[0])
    assert env["SM_NUM_GPUS"] == "1" and env["CUDA_VISIBLE_DEVICES"] not in (None, "")

    job = describe("on-the-gpu", home)
    assert job["TrainingJobStatus"] == "Completed"
    [prefix] = {a["Uri"] for a in job["Artifacts"] if a["Name"] == "profiler"}
    reader = ProfilerReader(store_for(prefix, Settings(home=home)), prefix)
    assert reader.refresh() and reader.errors == []
    meta = reader.meta["algo-1"]
    assert "NVIDIA" in json.dumps(meta), meta  # the GPU's name, as NVML reports it
    series = reader.series[SeriesKey("system", "algo-1")]
    gpus = numbered(series.columns, "gpu")
    assert gpus, series.columns
    column = next(iter(gpus.values()))
    assert max(series.column(column)) > 20.0  # the matrix products kept the GPU busy
    assert max(series.column(f"{column}_memory_bytes")) > 256 * 2**20

    # the job's profiler prefix lies in the home's object store (file://)
    traces = [p for p in home.rglob("*.pt.trace.json.gz") if "detailed" in p.parts]
    assert traces, "no detailed trace was written"
    events = json.loads(gzip.decompress(traces[0].read_bytes()))["traceEvents"]
    kinds = {event.get("cat") for event in events}
    assert "kernel" in kinds, sorted(k for k in kinds if k)
