"""A small real model and loop for the hook's tests, and a way to run scripts as a job would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainops.debugger.hook import Hook
from trainops.profiler._bootstrap import BOOTSTRAP_DIR

SRC = Path(__file__).resolve().parents[3] / "src"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc2(self.relu(self.fc1(x)))
        return out


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(5, 4, generator=generator), torch.randint(0, 3, (5,), generator=generator)


def train(
    hook: Hook, steps: int, *, model: nn.Module | None = None, compile_after: bool = False
) -> list[dict[str, Any]]:
    """``steps`` optimizer steps; returns, per step, the weights before it, grads and loss.
    ``compile_after``: the model is registered, then compiled (aot_eager) and trained so."""
    torch.manual_seed(0)
    net = model if model is not None else Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    hook.register_module(net)
    hook.register_loss(criterion)
    run = torch.compile(net, backend="aot_eager") if compile_after else net
    seen: list[dict[str, Any]] = []
    for step in range(steps):
        x, y = batch(step)
        weight = next(net.parameters()).detach().clone()
        optimizer.zero_grad()
        loss = criterion(run(x), y)
        loss.backward()
        grad = next(net.parameters()).grad
        assert grad is not None
        seen.append({"weight": weight.numpy(), "grad": grad.clone().numpy(), "loss": loss.item()})
        optimizer.step()
    return seen


def write_config(folder: Path, out_dir: Path, **parameters: Any) -> Path:
    """A ``debughookconfig.json`` as SageMaker writes it (every value a string)."""
    collections = parameters.pop("collections", {})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "debughookconfig.json"
    path.write_text(
        json.dumps(
            {
                "LocalPath": str(out_dir),
                "HookParameters": {k: str(v) for k, v in parameters.items()},
                "CollectionConfigurations": [
                    {"CollectionName": name, "CollectionParameters": params}
                    for name, params in collections.items()
                ],
            }
        )
    )
    return path


def run_job_script(
    tmp_path: Path,
    code: str,
    config_dir: Path,
    extra_path: Sequence[Path] = (),
    *,
    python: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a job's script: trainops' bootstrap first on ``PYTHONPATH`` (then
    ``extra_path``, a user's own paths, and trainops' sources); with ``python``, that
    interpreter (a job's own, which has no trainops) and the bootstrap alone on the path."""
    script = tmp_path / "train.py"
    script.write_text(code)
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SMDEBUG", "TRAINOPS"))
    }
    paths = [str(BOOTSTRAP_DIR), *map(str, extra_path)] + ([str(SRC)] if python is None else [])
    environ.update(PYTHONPATH=os.pathsep.join(paths))
    environ.update(SM_INPUT_CONFIG_DIR=str(config_dir), OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(
        [str(python or sys.executable), str(script)],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
