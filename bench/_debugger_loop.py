"""The loop bench/debugger_overhead.py times, in one process: the profiling example's CNN on
synthetic digits, hooked and bare models trained in alternating blocks of steps.

Two copies of the model (same initial weights) train side by side: one registered with a
``trainops.debugger.Hook`` configured by ``--mode``, one bare. Blocks of ``--block`` steps
alternate between them, so the machine's drift (a shared host) cancels out. Each step (fetch,
forward, backward, optimizer) is timed by the loop; the output is JSON with both lists.

    python bench/_debugger_loop.py --mode default|dense [--compile BACKEND] [--steps 400]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "profiling" / "src"))
from train import build_model

from trainops.debugger import Hook, SaveConfig


def make_hook(mode: str, out_dir: str) -> Hook:
    if mode == "default":  # smdebug's defaults: losses every 500 steps
        return Hook(out_dir)
    return Hook(  # dense: weights, gradients and losses, raw, every step
        out_dir,
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses"],
    )


def run(args: argparse.Namespace, out_dir: str) -> dict[str, Any]:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    images, labels = torch.randn(args.batch * 8, 1, 8, 8), torch.randint(0, 10, (args.batch * 8,))
    bare = build_model()
    hooked = copy.deepcopy(bare)
    criterion = nn.CrossEntropyLoss()
    hook = make_hook(args.mode, out_dir)
    runs = {}
    for name, model in (("bare", bare), ("hooked", hooked)):
        call = torch.compile(model, backend=args.compile) if args.compile else model
        if name == "hooked":
            hook.register_module(call)
            hook.register_loss(criterion)
        runs[name] = (call, torch.optim.Adam(model.parameters(), lr=0.003))
    times: dict[str, list[float]] = {"bare": [], "hooked": []}
    step = 0
    while len(times["hooked"]) < args.steps:
        for name, (call, optimizer) in runs.items():
            for _ in range(args.block):
                i = (step % 8) * args.batch
                began = time.perf_counter()
                optimizer.zero_grad()
                loss = criterion(call(images[i : i + args.batch]), labels[i : i + args.batch])
                loss.backward()
                optimizer.step()
                times[name].append(time.perf_counter() - began)
                step += 1
    began = time.perf_counter()
    hook.close()
    return {**times, "close_seconds": time.perf_counter() - began}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("default", "dense"), default="default")
    parser.add_argument("--compile", default="", help="torch.compile backend (none: eager)")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        print(json.dumps(run(args, out_dir)))


if __name__ == "__main__":
    main()
