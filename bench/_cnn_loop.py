"""The training loop bench/profiler_overhead.py times: the profiling example's CNN on synthetic
digits, one process per run, its own step times on stdout as JSON.

The model is ``build_model()`` of examples/profiling/src/train.py; the data are random 8x8
images with 10 labels, as many as the digits data (1,797), through a ``DataLoader`` in the main
process (no worker: fewer moving parts). A step is the time from one iteration's start to the
next's (fetch, forward, backward, optimizer), measured by the loop itself with
``time.perf_counter``, whatever trainops does in the process.

With ``--toggle N`` (in a process where trainops' step-timing hooks are installed) the hooks
are taken off and put back every N steps, so hooked and bare steps interleave in one process;
the output then says which steps were hooked.

``--device cuda`` trains on the GPU: each batch is moved there and each step ends with
``torch.cuda.synchronize()`` (as a loop that reads its loss each step waits for the GPU), so a
step's time is the GPU's work and the launches that feed it.

``--micro`` (hooks installed) times the hooks alone instead: the recorder's events for one
step called in a tight loop, and a tiny model (8 linear layers of 4, batch 4: a step of a few
hundred microseconds) hooked against bare in alternating blocks, the fastest block of each.

    python bench/_cnn_loop.py --steps 400 --batch 64 [--toggle 10] [--device cuda]
    python bench/_cnn_loop.py --micro
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "profiling" / "src"))
from train import build_model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--toggle", type=int, default=0)
    parser.add_argument("--micro", action="store_true")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    hooks = sys.modules.get("trainops.profiler._torch_hooks")
    if args.micro:
        if hooks is None:
            raise SystemExit("--micro needs the step-timing hooks (the bootstrap on PYTHONPATH)")
        print(json.dumps(micro(hooks)))
        return
    if args.toggle and hooks is None:
        raise SystemExit("--toggle needs the step-timing hooks (the bootstrap on PYTHONPATH)")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(1797, 1, 8, 8), torch.randint(0, 10, (1797,)))
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, drop_last=True)
    device = torch.device(args.device)
    model = build_model().to(device)
    wait = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    marks, hooked = [time.perf_counter()], list[bool]()
    while len(marks) <= args.steps:
        for images, labels in loader:
            if hooks is not None and args.toggle and len(hooked) % args.toggle == 0:
                if (len(hooked) // args.toggle) % 2 == 1:
                    hooks.uninstall()
                else:
                    hooks.install(torch)
            hooked.append(hooks is not None and hooks.installed())
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            wait()
            marks.append(time.perf_counter())
            if len(marks) > args.steps:
                break
    times = [b - a for a, b in itertools.pairwise(marks)]
    print(json.dumps({"times": times, "hooked": hooked}))


def micro(hooks: Any, blocks: int = 30, steps: int = 300) -> dict[str, float]:
    """Microseconds per step: the recorder's events alone, and a tiny model hooked vs bare."""
    from trainops.profiler._recorder import current

    recorder = current()
    assert recorder is not None
    clock, count = time.perf_counter, 100_000
    began = clock()
    for index in range(count):
        start = clock()
        recorder.fetched(start, clock(), 4.0, (0.0, float(index)))
        recorder.forward_began(clock())
        recorder.forward_ended(clock(), True)
        recorder.optimizer_began(clock())
        recorder.optimizer_ended(clock())
    events = (clock() - began) / count
    torch.set_num_threads(1)
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(8)])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)

    def block() -> float:
        loader = DataLoader(TensorDataset(torch.randn(4 * steps, 4)), batch_size=4)
        start = clock()
        for (x,) in loader:
            optimizer.zero_grad()
            model(x).sum().backward()  # type: ignore[no-untyped-call]
            optimizer.step()
        return (clock() - start) / steps

    bare, hooked = [], []
    for _ in range(blocks):
        hooks.uninstall()
        bare.append(block())
        hooks.install(torch)
        block()  # the hooks find the model and move onto it
        hooked.append(block())
    return {
        "events_us": 1e6 * events,
        "tiny_bare_us": 1e6 * min(bare),
        "tiny_hooked_us": 1e6 * min(hooked),
    }


if __name__ == "__main__":
    main()
