"""Debugger overhead: what the PyTorch hook costs a training step, against the bare model and
against the peers a user would reach for, in the same run.

The profiling example's CNN (``build_model()`` of examples/profiling/src/train.py) trains on
synthetic digits (bench/_debugger_loop.py): in one child process an instrumented copy and a
bare copy of the model train in alternating blocks of steps, so the machine's drift cancels
out. Paths, one child each, interleaved in every round (A, B, A, B; reversed every other round):

- ``trainops default``: ``Hook(out_dir)`` with smdebug's defaults (losses, every 500 steps):
  the cost of leaving the debugger on (target <= 2 %);
- ``trainops dense``: weights, gradients and losses, raw, at every step (``save_interval=1``);
- ``trainops dense-tb``: the same with its TensorBoard export (histograms of every weight and
  gradient, the loss as a scalar), the peer of the next one;
- ``tensorboard dense``: the peer written by hand, ``torch.utils.tensorboard``'s
  ``add_histogram`` of every parameter and gradient (and the loss as a scalar) at every step;
- ``smdebug default`` / ``smdebug dense``: smdebug's own hook with the same settings, run with
  ``--smdebug-python`` (a Python where smdebug is installed beside this PyTorch);
- with ``--compile BACKEND``, each again with the models compiled (``torch.compile``).

Also, once per tool: graph breaks of the compiled forward and loss with and without the hook
registered (``torch._dynamo.explain``; target: no additional break).

Figures: the median step of each side (first ``--warmup`` steps dropped), the overhead in
percent and µs per step, the median of the rounds. Results go to
bench/results/debugger_overhead.json and the table in bench/README.md.

    python bench/debugger_overhead.py [--rounds 5] [--steps 300] [--compile inductor]
        [--smdebug-python /path/to/venv/bin/python]
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
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=40)
    parser.add_argument("--compile", default="", help="also compiled, with this backend")
    parser.add_argument("--smdebug-python", default="", help="a Python with smdebug installed")
    parser.add_argument("--only", default="", help="comma list of paths (tool mode) to run")
    return parser.parse_args()


def child(args: argparse.Namespace, tool: str, *extra: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    python = args.smdebug_python if tool == "smdebug" else sys.executable
    command = [python, str(BENCH / "_debugger_loop.py"), "--tool", tool, *extra]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:300]}"}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def figures(sample: dict[str, Any], warmup: int) -> dict[str, float]:
    bare = statistics.median(sample["bare"][warmup:])
    hooked = statistics.median(sample["hooked"][warmup:])
    return {
        "bare_ms": bare * 1e3,
        "hooked_ms": hooked * 1e3,
        "percent": (hooked / bare - 1) * 100,
        "close_s": float(sample["close_seconds"]),
    }


def paths(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(tool, mode, backend) for every path measured."""
    tools = [("trainops", "default"), ("trainops", "dense"), ("trainops", "dense-tb")]
    tools += [("tensorboard", "dense")]
    if args.smdebug_python:
        tools += [("smdebug", "default"), ("smdebug", "dense")]
    backends = ["", args.compile] if args.compile else [""]
    found = [(tool, mode, backend) for backend in backends for tool, mode in tools]
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    return [p for p in found if not only or f"{p[0]} {p[1]}" in only]


def key_of(tool: str, mode: str, backend: str) -> str:
    return f"{tool} {mode}" + (f" +{backend}" if backend else "")


def main() -> None:
    args = parse_args()
    measured = paths(args)
    rounds: dict[str, list[dict[str, float]]] = {key_of(*p): [] for p in measured}
    errors: dict[str, str] = {}
    loads = [os.getloadavg()[0]]
    for index in range(args.rounds):
        for tool, mode, backend in measured if index % 2 == 0 else measured[::-1]:
            key = key_of(tool, mode, backend)
            extra = ["--mode", mode, "--steps", str(args.steps), *(["--swap"] if index % 2 else [])]
            sample = child(args, tool, *extra, *(["--compile", backend] if backend else []))
            if "error" in sample:
                errors[key] = sample["error"]
                print(key, sample["error"], flush=True)
                continue
            rounds[key].append(figures(sample, args.warmup))
            print(key, rounds[key][-1], flush=True)
        loads.append(os.getloadavg()[0])
    summary = {
        key: {name: statistics.median(r[name] for r in found) for name in found[0]}
        for key, found in rounds.items()
        if found
    }
    result = header(SECTION, vars(args)) | {"rounds": rounds, "summary": summary}
    result["errors"] = errors
    result["graph_breaks"] = graph_breaks(args)
    result["load_average_1min"] = statistics.median(loads)
    result["load_average_range"] = [min(loads), max(loads)]
    publish(
        result, BENCH / "results" / f"{SECTION}.json", BENCH / "README.md", SECTION, table(result)
    )


def graph_breaks(args: argparse.Namespace) -> dict[str, Any]:
    tools = ["trainops"] + (["smdebug"] if args.smdebug_python else [])
    return {tool: child(args, tool, "--explain") for tool in tools}


WHAT = {
    "trainops default": "trainops hook, defaults (losses every 500 steps) (target ≤ 2 %)",
    "trainops dense": "trainops hook, weights + gradients + losses, raw, every step",
    "trainops dense-tb": "trainops hook, the same + its TensorBoard export (histograms of every "
    "weight and gradient, the loss)",
    "tensorboard dense": "by hand: `torch.utils.tensorboard` histograms of every parameter and "
    "gradient + the loss, every step",
    "smdebug default": "smdebug 1.0.34 hook, defaults (losses every 500 steps)",
    "smdebug dense": "smdebug 1.0.34 hook, weights + gradients + losses, raw, every step",
}


def table(result: dict[str, Any]) -> str:
    lines = [
        "| path | compiled | step p50 bare (ms) | step p50 with it (ms) | overhead |",
        "|---|---|---:|---:|---:|",
    ]
    for key, found in result["summary"].items():
        path, _, backend = key.partition(" +")
        shift = (found["hooked_ms"] - found["bare_ms"]) * 1e3
        extra = f"{found['percent']:+.2f} % ({shift:+.0f} µs/step)"
        lines.append(
            f"| {WHAT[path]} | {backend or 'eager'} | {found['bare_ms']:.2f} "
            f"| {found['hooked_ms']:.2f} | {extra} |"
        )
    for key, error in result["errors"].items():
        lines.append(f"| {key} | | | | failed: {error} |")
    lines += ["", breaks_line(result["graph_breaks"]), ""]
    args = result["args"]
    low, high = result["load_average_range"]
    lines.append(
        f"Measured {result['date']} on {result['machine'].get('cpu_model', '?')}, load average "
        f"{result['load_average_1min']:.1f} ({low:.1f} to {high:.1f}; a shared 2-core machine); "
        f"torch {result['versions']['torch']}, one intra-op thread; {args['steps']} steps of "
        f"batch 64 per side in blocks of 20, first {args['warmup']} dropped; median of "
        f"{args['rounds']} rounds, paths interleaved. Raw samples: "
        f"[results/{SECTION}.json](results/{SECTION}.json)."
    )
    return "\n".join(lines)


def breaks_line(found: dict[str, Any]) -> str:
    parts = []
    for tool, counts in found.items():
        if "error" in counts:
            parts.append(f"{tool}: failed ({counts['error']})")
            continue
        hooked = counts.get("hooked", {})
        parts.append(
            f"{tool}: {counts['bare']['breaks']} bare, {hooked.get('breaks', '?')} with its hook "
            f"({hooked.get('graphs', '?')} graphs)"
        )
    return (
        "Graph breaks (`torch._dynamo.explain` of the compiled forward + loss): "
        + "; ".join(parts)
        + "."
    )


if __name__ == "__main__":
    main()
