"""The loop bench/debugger_overhead.py times, in one process: the profiling example's CNN on
synthetic digits, instrumented and bare models trained in alternating blocks of steps.

Two copies of the model (same initial weights) train side by side: one instrumented by
``--tool`` as ``--mode`` says, one bare. Blocks of ``--block`` steps alternate between them, so
the machine's drift (a shared host) cancels out. Each step (fetch, forward, backward,
optimizer, and whatever the tool does in it) is timed by the loop; the output is JSON with
both lists. Tools:

- ``trainops``: ``trainops.debugger.Hook`` (``default``: smdebug's defaults, losses every 500
  steps; ``dense``: weights, gradients and losses, raw, every step; ``dense-tb``: the same and
  its TensorBoard export, a histogram of every weight and gradient and the loss as a scalar);
- ``smdebug``: ``smdebug.pytorch.Hook`` with the same settings (run this with a Python where
  smdebug is installed);
- ``tensorboard``: ``torch.utils.tensorboard.SummaryWriter`` by hand, as a user would write it:
  ``add_histogram`` of every parameter and gradient and ``add_scalar`` of the loss, every step
  (``dense``) or every 500th (``default``).

``--explain`` counts graph breaks instead (``torch._dynamo.explain`` of the compiled model's
forward and loss, bare and with the tool's hook registered at a saving step).

    python bench/_debugger_loop.py --tool trainops --mode default|dense [--compile BACKEND]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "profiling" / "src"))
from train import build_model

DENSE = ["weights", "gradients", "losses"]
DEFAULT_INTERVAL = 500  # smdebug's default save interval

# after_backward(step, model, loss): what a hand-written logger does inside the step
AfterBackward = Callable[[int, nn.Module, torch.Tensor], None]


def make_hook(tool: str, mode: str, out_dir: str) -> Any:
    if tool == "trainops":
        from trainops.debugger import Hook, SaveConfig
    else:
        from smdebug.pytorch import Hook, SaveConfig
    if mode == "default":  # smdebug's defaults: losses every 500 steps
        return Hook(out_dir)
    export = {"export_tensorboard": True} if mode == "dense-tb" else {}
    return Hook(
        out_dir, save_config=SaveConfig(save_interval=1), include_collections=DENSE, **export
    )


def hand_logger(mode: str, out_dir: str) -> tuple[AfterBackward, Callable[[], None]]:
    """``torch.utils.tensorboard`` histograms of every parameter and gradient, by hand."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(out_dir)
    interval = 1 if mode == "dense" else DEFAULT_INTERVAL

    def after_backward(step: int, model: nn.Module, loss: torch.Tensor) -> None:
        if step % interval:
            return
        writer.add_scalar("loss", loss.item(), step)
        for name, parameter in model.named_parameters():
            writer.add_histogram(f"weights/{name}", parameter.detach(), step)
            if parameter.grad is not None:
                writer.add_histogram(f"gradients/{name}", parameter.grad, step)

    return after_backward, writer.close


def run(args: argparse.Namespace, out_dir: str) -> dict[str, Any]:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    images, labels = torch.randn(args.batch * 8, 1, 8, 8), torch.randint(0, 10, (args.batch * 8,))
    bare = build_model()
    tooled = copy.deepcopy(bare)
    after: AfterBackward | None = None
    if args.tool == "tensorboard":
        after, close = hand_logger(args.mode, out_dir)
    else:
        hook = make_hook(args.tool, args.mode, out_dir)
        close = hook.close
    runs = {}
    # An A/A run (no hook on either side) favours the first-built copy that runs first by about
    # 3 % here; --swap gives the hooked side the original model and the first block, so rounds
    # with and without it cancel that out.
    sides = (
        (("hooked", bare), ("bare", tooled)) if args.swap else (("bare", bare), ("hooked", tooled))
    )
    for name, model in sides:
        call = torch.compile(model, backend=args.compile) if args.compile else model
        criterion = nn.CrossEntropyLoss()  # one each: a registered loss is the hook's
        if name == "hooked" and args.tool != "tensorboard":
            hook.register_module(call)
            hook.register_loss(criterion)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
        runs[name] = (model, call, criterion, optimizer)
    times: dict[str, list[float]] = {"bare": [], "hooked": []}
    step = 0
    while len(times["hooked"]) < args.steps:
        for name, (model, call, criterion, optimizer) in runs.items():
            for _ in range(args.block):
                i = (step % 8) * args.batch
                began = time.perf_counter()
                optimizer.zero_grad()
                loss = criterion(call(images[i : i + args.batch]), labels[i : i + args.batch])
                loss.backward()
                if after is not None and name == "hooked":
                    after(len(times["hooked"]), model, loss)
                optimizer.step()
                times[name].append(time.perf_counter() - began)
                step += 1
    began = time.perf_counter()
    close()
    return {**times, "close_seconds": time.perf_counter() - began}


def explain(args: argparse.Namespace, out_dir: str) -> dict[str, Any]:
    """Graph breaks of the compiled forward + loss, bare, then with the tool's hook registered
    (dense, so that the step being explained is a saving one)."""
    torch.manual_seed(0)
    images, labels = torch.randn(args.batch, 1, 8, 8), torch.randint(0, 10, (args.batch,))
    criterion = nn.CrossEntropyLoss()

    def count(model: nn.Module) -> dict[str, Any]:
        torch._dynamo.reset()
        found = torch._dynamo.explain(lambda x, y: criterion(model(x), y))(images, labels)
        return {
            "graphs": found.graph_count,
            "breaks": found.graph_break_count,
            "reasons": sorted({str(b.reason)[:200] for b in found.break_reasons}),
        }

    out: dict[str, Any] = {"bare": count(build_model())}
    if args.tool == "tensorboard":
        return out  # by hand, outside the compiled code: nothing to explain
    model = build_model()
    hook = make_hook(args.tool, "dense", out_dir)
    hook.register_module(model)
    hook.register_loss(criterion)
    criterion(model(images), labels).backward()  # a first step, as in training
    out["hooked"] = count(model)
    hook.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--tool", choices=("trainops", "smdebug", "tensorboard"), default="trainops"
    )
    parser.add_argument("--mode", choices=("default", "dense", "dense-tb"), default="default")
    parser.add_argument("--compile", default="", help="torch.compile backend (none: eager)")
    parser.add_argument("--explain", action="store_true", help="count graph breaks instead")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--swap", action="store_true", help="the hooked side takes the original model, first"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out_dir:
        result = explain(args, out_dir) if args.explain else run(args, out_dir + "/out")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
