"""Two ranks of one host under torchrun (gloo on loopback, DDP): one step series per rank."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.profiler._support import environment, rows, series, settings

DDP = """
import atexit, os
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("gloo")
data = TensorDataset(torch.randn(64, 5), torch.randn(64, 1))
loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data))  # 8 steps per rank
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Linear(8, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
dist.destroy_process_group()
print("rank", os.environ["RANK"], "done", flush=True)
# Exit as Python would (atexit handlers, the recorder's last rows among them), but skip the C++
# static destructors: gloo's sometimes abort ("terminate called without an active exception")
# after everything was written, which torchrun reports as a failed rank.
atexit._run_exitfuncs()
os._exit(0)
"""


def test_each_rank_writes_its_own_series(tmp_path: Path) -> None:
    root = tmp_path / "profiler"
    script = tmp_path / "ddp.py"
    script.write_text(DDP)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", "2", str(script)]  # standalone: a free port of its own
    env = environment(root, settings(), OMP_NUM_THREADS="1")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    ranks = sorted(p.name for p in (root / "framework" / "steps" / "algo-1").iterdir())
    assert ranks == ["rank-0", "rank-1"]
    for rank in (0, 1):
        found = series(root, "steps", rank=rank)
        assert found.header["rank"] == rank
        assert [(r["step"], r["samples"]) for r in rows(found)] == [(s, 4.0) for s in range(8)]
