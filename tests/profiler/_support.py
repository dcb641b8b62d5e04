"""Running real training scripts under the recorder, and reading what they wrote.

Scripts run as subprocesses of this interpreter with the bootstrap directory first on
``PYTHONPATH`` (as the framework sidecar puts it) and this checkout's ``src`` after it, and
``TRAINOPS_PROFILER_DIR`` / ``TRAINOPS_PROFILER_CONFIG`` set as the profiler sidecar sets them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trainops
from trainops.profiler import Series, decode_chunk, merge_chunks
from trainops.profiler._bootstrap import BOOTSTRAP_DIR

SRC = Path(trainops.__file__).resolve().parent.parent
HOST = "algo-1"

#: A plain PyTorch loop: nothing in it knows about trainops. argv[1] is a JSON object of knobs.
TRAIN = r"""
import json, sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

def main():
    knobs = json.loads(sys.argv[1])
    torch.manual_seed(0)
    n, batch = knobs.get("items", 96), knobs.get("batch", 8)
    data = TensorDataset(torch.randn(n, 1, 8, 8), torch.randint(0, 10, (n,)))
    context = knobs.get("start_method")  # DataLoader workers: fork (default) or spawn
    loader = DataLoader(data, batch_size=batch, num_workers=knobs.get("workers", 0),
                        multiprocessing_context=context)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 8 * 8, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 0
    for epoch in range(knobs.get("epochs", 1)):
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            time.sleep(knobs.get("sleep", 0.0))
            optimizer.step()
            steps += 1
        model.eval()
        with torch.no_grad():
            for images, labels in DataLoader(data, batch_size=knobs.get("eval_batch", 32)):
                model(images)
    print(f"optimizer_steps={steps}", flush=True)

if __name__ == "__main__":
    main()
"""


def environment(
    root: Path | None, config: dict[str, Any] | Path | None = None, **extra: str
) -> dict[str, str]:
    """The script's environment: bootstrap and src first on PYTHONPATH (then this process's
    own), the two variables set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    outer = os.environ.get("PYTHONPATH", "").split(os.pathsep)  # what this process imports from
    path = [str(BOOTSTRAP_DIR), str(SRC), *extra.pop("PYTHONPATH", "").split(os.pathsep), *outer]
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    env.pop("RANK", None)
    if root is not None:
        env["TRAINOPS_PROFILER_DIR"] = str(root)
        if isinstance(config, dict):
            file = root.parent / "profilerconfig.json"
            file.write_text(json.dumps(config))
            env["TRAINOPS_PROFILER_CONFIG"] = str(file)
        elif config is not None:
            env["TRAINOPS_PROFILER_CONFIG"] = str(config)
    env.update(extra)
    return env


def run_script(
    tmp_path: Path, code: str, env: dict[str, str], *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return result


def train(
    tmp_path: Path, knobs: dict[str, Any], config: dict[str, Any] | None = None
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Run :data:`TRAIN` with ``knobs`` under the recorder: the profiler root and the result."""
    root = tmp_path / "profiler"
    env = environment(root, config or settings())
    return root, run_script(tmp_path, TRAIN, env, json.dumps(knobs))


def settings(framework: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """A settings document as the profiler sidecar writes it."""
    profiler = {
        "s3_output_path": None,
        "system_monitor_interval_millis": 500,
        "framework_profile_params": framework,
        "disable_profiler": False,
    }
    return {"host": HOST, "attempt": 1, "job_start": 0.0, "profiler_config": profiler, **top}


def window(
    start_step: int | None = None, num_steps: int | None = None, **more: Any
) -> dict[str, Any]:
    return {
        "start_step": start_step,
        "num_steps": num_steps,
        "start_unix_time": more.pop("start_unix_time", None),
        "duration": more.pop("duration", None),
        **more,
    }


def series(root: Path, kind: str, rank: int = 0, host: str = HOST) -> Series:
    """Every chunk of one rank's series, merged (an empty Series when there is none)."""
    directory = root / "framework" / kind / host / f"rank-{rank}"
    chunks = [decode_chunk(p.read_bytes(), str(p)) for p in sorted(directory.glob("*.tsc"))]
    return merge_chunks(chunks)


def rows(found: Series) -> list[dict[str, float]]:
    return [dict(zip(found.columns, row, strict=True)) for row in found.rows]


def optimizer_steps(stdout: str) -> int:
    for line in stdout.splitlines():
        if line.startswith("optimizer_steps="):
            return int(line.split("=")[1])
    raise AssertionError(f"no optimizer_steps line in {stdout!r}")
