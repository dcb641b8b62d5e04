"""End to end: `trainops run` of a two-host job whose plain PyTorch script knows nothing of
trainops; afterwards the job's profiler prefix holds each host's step rows and detailed trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.e2e._harness import trainops, write_job
from trainops._settings import Settings
from trainops.profiler import MODE_TRAIN, ProfilerReader, SeriesKey
from trainops.storage import store_for

pytestmark = pytest.mark.slow

PLAIN = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.utils.data.TensorDataset(torch.randn(48, 6), torch.randint(0, 2, (48,)))
for x, y in torch.utils.data.DataLoader(data, batch_size=6):
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
print("trained", flush=True)
"""


def test_steps_and_a_detailed_window_reach_the_profiler_prefix(tmp_path: Path) -> None:
    framework = {"detailed_profiling_config": {"start_step": 2, "num_steps": 2}}
    spec = write_job(
        tmp_path,
        PLAIN,
        job_name="stepped",
        instance_count=2,
        profiler_config={"framework_profile_params": framework},
    )
    home = tmp_path / "home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    prefix = (home / "objects" / "jobs" / "stepped" / "profiler-output").as_uri()
    reader = ProfilerReader(store_for(prefix, Settings(home=home)), prefix)
    assert reader.refresh() and reader.errors == []
    for rank, host in enumerate(("algo-1", "algo-2")):  # the agent's RANK: one per host here
        steps = reader.series[SeriesKey("steps", host, rank)]
        assert steps.column("step") == [float(s) for s in range(8)]
        assert set(steps.column("mode")) == {MODE_TRAIN}
        assert set(steps.column("samples")) == {6.0}
    traces = sorted(k for k in reader.files.get("detailed", []))
    assert [k.split("/", 2)[2] for k in traces] == [
        "algo-1/rank-0/1-step2-3.pt.trace.json.gz",
        "algo-2/rank-1/1-step2-3.pt.trace.json.gz",
    ]
    trace = json.loads(
        gzip.decompress(store_for(prefix, Settings(home=home)).get_bytes(f"{prefix}/{traces[0]}"))
    )
    assert trace["traceEvents"] and trace["distributedInfo"]["rank"] == 0
