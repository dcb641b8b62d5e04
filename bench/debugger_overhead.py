"""Debugger overhead: what the PyTorch hook costs a training step, against the bare model.

The profiling example's CNN (``build_model()`` of examples/profiling/src/train.py) trains on
synthetic digits (bench/_debugger_loop.py): in one child process, a hooked copy and a bare copy
of the model train in alternating blocks of steps, so the machine's drift cancels out. Modes,
one child each, interleaved in every round:

- ``default``: ``Hook(out_dir)`` with smdebug's defaults (losses, every 500 steps): the cost of
  leaving the debugger on (target ≤ 2 %);
- ``dense``: weights, gradients and losses, raw, at every step (``save_interval=1``): what
  saving everything costs;
- with ``--compile BACKEND``, both again with the models compiled (``torch.compile``).

Figures: the median step of each side (first ``--warmup`` steps dropped), the overhead in
percent and µs per step, the median of the rounds. Results go to
bench/results/debugger_overhead.json and the table in bench/README.md.

    python bench/debugger_overhead.py [--rounds 3] [--steps 400] [--compile inductor]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from _storage_bench import BENCH, ROOT, header, publish

SECTION = "debugger_overhead"
TARGET_PERCENT = 2.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--compile", default="", help="also compiled, with this backend")
    return parser.parse_args()


def child(mode: str, args: argparse.Namespace, backend: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(BENCH / "_debugger_loop.py"), "--mode", mode]
    command += ["--steps", str(args.steps)] + (["--compile", backend] if backend else [])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def figures(sample: dict[str, Any], warmup: int) -> dict[str, float]:
    bare = statistics.median(sample["bare"][warmup:])
    hooked = statistics.median(sample["hooked"][warmup:])
    return {"bare_ms": bare * 1e3, "hooked_ms": hooked * 1e3, "percent": (hooked / bare - 1) * 100}


def main() -> None:
    args = parse_args()
    paths = [(mode, "") for mode in ("default", "dense")]
    paths += [(mode, args.compile) for mode in ("default", "dense")] if args.compile else []
    rounds: dict[str, list[dict[str, float]]] = {f"{m}{'+' + b if b else ''}": [] for m, b in paths}
    for index in range(args.rounds):
        for mode, backend in paths if index % 2 == 0 else paths[::-1]:
            key = f"{mode}{'+' + backend if backend else ''}"
            rounds[key].append(figures(child(mode, args, backend), args.warmup))
            print(key, rounds[key][-1], flush=True)
    summary = {
        key: {name: statistics.median(r[name] for r in found) for name in found[0]}
        for key, found in rounds.items()
    }
    result = header(SECTION, vars(args)) | {"rounds": rounds, "summary": summary}
    load = os.getloadavg()[0]
    result["load_average_1min"] = load
    publish(
        result, BENCH / "results" / f"{SECTION}.json", BENCH / "README.md", SECTION, table(result)
    )


def table(result: dict[str, Any]) -> str:
    what = {
        "default": "defaults (losses every 500 steps), eager (target ≤ 2 %)",
        "dense": "weights + gradients + losses, raw, every step, eager",
    }
    lines = [
        "| hook | step p50 bare (ms) | step p50 hooked (ms) | overhead |",
        "|---|---:|---:|---:|",
    ]
    for key, found in result["summary"].items():
        mode, _, backend = key.partition("+")
        label = (
            what[mode] if not backend else what[mode].replace("eager", f"torch.compile ({backend})")
        )
        extra = f"{found['percent']:+.2f} % ({(found['hooked_ms'] - found['bare_ms']) * 1e3:+.0f} µs/step)"
        lines.append(f"| {label} | {found['bare_ms']:.3f} | {found['hooked_ms']:.3f} | {extra} |")
    args = result["args"]
    lines.append("")
    lines.append(
        f"Measured {result['date']} on {result['machine'].get('cpu_model', '?')}, load average "
        f"{result['load_average_1min']:.1f} (a shared machine); torch {result['versions']['torch']}, "
        f"one intra-op thread; {args['steps']} steps of batch 64 per side in blocks of 20, first "
        f"{args['warmup']} dropped; median of {args['rounds']} interleaved rounds. Raw samples: "
        f"[results/{SECTION}.json](results/{SECTION}.json)."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
