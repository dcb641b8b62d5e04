"""Profiler overhead: what step timing and a detailed torch.profiler window cost a training step.

The profiling example's CNN (``build_model()`` of examples/profiling/src/train.py) trains on
synthetic digits in a child process (bench/_cnn_loop.py), which times its own steps. Modes, one
child each, interleaved in every round (A, B, C, then C, B, A, ...):

- ``baseline``: the script alone (no bootstrap on ``PYTHONPATH``, no profiler variables);
- ``steps``: step timing with no code change (the framework sidecar's bootstrap on
  ``PYTHONPATH``, ``TRAINOPS_PROFILER_DIR`` set, no profiling window): the global optimizer,
  module-forward and DataLoader hooks, one row per step. The loop also takes the hooks off and
  puts them back every ``--toggle`` steps, so hooked and bare steps interleave in one process:
  the machine's drift (other work on a shared host) cancels out of that comparison;
- ``detailed``: step timing plus a detailed (torch.profiler) window over steps
  ``[--window-start, --window-start + --window-steps)``: the steps inside it and those after it
  closed (from ``--settle`` steps after its end), against the same process's steps before it.

Figures (the first ``--warmup`` steps dropped; the median of the rounds' medians): the overhead
of step timing, hooked against bare steps of one process, in percent and microseconds per step
(target ≤ 2 % with the monitor's share, see below), and the same across processes (steps mode
against baseline, noisier); the detailed window's cost while open, and after it closed (must be
back at the baseline: the steps before the window). A last child times the hooks alone (``_cnn_loop.py --micro``):
the recorder's work for one step, and a tiny model's step hooked against bare, in µs.

The system monitor's CPU cost (the other half of the issue's figures) is measured by
bench/_monitor_cost.py in the same run (its own interleaved rounds: the monitor, the sidecar
with its mirror, the sampler alone, a psutil loop and an idle floor at 100 ms and 500 ms) and
kept as ``result["figures"]["monitor"]``.

    python bench/profiler_overhead.py [--rounds 5] [--steps 400] [--batch 64] [--monitor-seconds 10]

``--device cuda`` runs the same on a GPU (bench/_cnn_loop.py's ``--device``: each step waits
for the GPU) and keeps its figures apart (``profiler_overhead_gpu``): a GPU step of this small
CNN is mostly kernel launches, so what the hooks add per step weighs more there than on a CPU.
The detailed window then traces CUDA too (CUPTI), and "after the window closed" says whether
the GPU's steps get back to their speed once it is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _storage_bench import BENCH, ROOT, header, publish

SECTION = "profiler_overhead"
TARGET_PERCENT = 2.0
MODES = ("baseline", "steps", "detailed")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--window-start", type=int, default=150)
    parser.add_argument("--window-steps", type=int, default=20)
    parser.add_argument("--settle", type=int, default=20)
    parser.add_argument("--toggle", type=int, default=10, help="steps per hooked/bare block")
    parser.add_argument(
        "--monitor-seconds", type=float, default=10.0, help="each monitor-cost run (0: skip)"
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--out", type=Path, help="default: results/<section>.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    args.section = SECTION if args.device == "cpu" else f"{SECTION}_gpu"
    if args.out is None:
        args.out = BENCH / "results" / f"{args.section}.json"
    return args


def _environment(mode: str, workdir: Path, args: argparse.Namespace) -> dict[str, str]:
    from trainops.profiler._bootstrap import BOOTSTRAP_DIR

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    src = str(ROOT / "src")
    if mode == "baseline":
        env["PYTHONPATH"] = src
        return env
    framework = None
    if mode == "detailed":
        window = {"start_step": args.window_start, "num_steps": args.window_steps}
        framework = {"detailed_profiling_config": window}
    config = workdir / f"{mode}-config.json"
    profiler = {"framework_profile_params": framework, "disable_profiler": False}
    config.write_text(json.dumps({"host": "bench", "attempt": 1, "profiler_config": profiler}))
    env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP_DIR), src])
    env["TRAINOPS_PROFILER_DIR"] = str(workdir / mode)
    env["TRAINOPS_PROFILER_CONFIG"] = str(config)
    return env


def run_mode(mode: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, str(BENCH / "_cnn_loop.py"), "--steps", str(args.steps)]
    command += ["--batch", str(args.batch), "--device", args.device]
    if mode == "steps":
        command += ["--toggle", str(args.toggle)]
    if mode == "micro":
        command = [sys.executable, str(BENCH / "_cnn_loop.py"), "--micro"]
    done = subprocess.run(
        command,
        env=_environment(mode, workdir, args),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode}: the loop failed:\n{done.stderr}")
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _span(run: dict[str, list[Any]], a: int, b: int, hooked: bool | None = None) -> float:
    times = run["times"][a:b]
    if hooked is not None:
        times = [t for t, h in zip(times, run["hooked"][a:b], strict=True) if h == hooked]
    return _median(times)


def summarize(
    samples: dict[str, list[dict[str, list[Any]]]], args: argparse.Namespace
) -> dict[str, Any]:
    """Medians of the rounds' medians, and the overheads they give."""
    start, end, n = args.window_start, args.window_start + args.window_steps, args.steps

    def rounds(mode: str, a: int, b: int, hooked: bool | None = None) -> float:
        return _median([_span(run, a, b, hooked) for run in samples[mode]])

    medians = {
        "baseline": rounds("baseline", args.warmup, n),
        "steps_all": rounds("steps", args.warmup, n),
        "steps_hooked": rounds("steps", args.warmup, n, True),
        "steps_bare": rounds("steps", args.warmup, n, False),
        "detailed_before": rounds("detailed", args.warmup, start),
        "detailed_window": rounds("detailed", start, end),
        "detailed_after": rounds("detailed", end + args.settle, n),
    }
    hooked, bare = medians["steps_hooked"], medians["steps_bare"]
    before = medians["detailed_before"]
    return {
        "median_step_s": medians,
        "step_timing_overhead_percent": 100 * (hooked / bare - 1),
        "step_timing_overhead_us": 1e6 * (hooked - bare),
        "across_processes_percent": 100 * (medians["steps_all"] / medians["baseline"] - 1),
        "window_open_overhead_percent": 100 * (medians["detailed_window"] / before - 1),
        "after_window_overhead_percent": 100 * (medians["detailed_after"] / before - 1),
        "target_percent": TARGET_PERCENT,
        "monitor": None,  # filled from bench/_monitor_cost.py (the system monitor's CPU cost)
    }


def render_table(result: dict[str, Any]) -> str:
    figures, args = result["figures"], result["args"]
    medians = figures["median_step_s"]

    def ms(name: str) -> str:
        return f"{1000 * medians[name]:.3f}"

    last = args["window_start"] + args["window_steps"] - 1
    lines = [
        "| what | step p50 without (ms) | step p50 with (ms) | overhead |",
        "|---|---:|---:|---:|",
        f"| step timing, no code change: hooked vs bare steps of one process (target ≤ "
        f"{TARGET_PERCENT:g} % with the monitor) | {ms('steps_bare')} | {ms('steps_hooked')} "
        f"| {figures['step_timing_overhead_percent']:+.2f} % "
        f"({figures['step_timing_overhead_us']:+.0f} µs/step) |",
        f"| step timing, across processes (baseline vs bootstrap) | {ms('baseline')} "
        f"| {ms('steps_all')} | {figures['across_processes_percent']:+.2f} % |",
        f"| detailed window open (steps {args['window_start']}-{last}) vs before it "
        f"| {ms('detailed_before')} | {ms('detailed_window')} "
        f"| {figures['window_open_overhead_percent']:+.1f} % |",
        f"| after the window closed vs before it | {ms('detailed_before')} "
        f"| {ms('detailed_after')} | {figures['after_window_overhead_percent']:+.2f} % |",
    ]
    micro = figures["micro_us"]
    lines.append(
        f"| the hooks alone: a tiny model's step (8 linear layers, batch 4), fastest of 30 "
        f"blocks; the recorder's events for one step: {micro['events_us']:.1f} µs "
        f"| {micro['tiny_bare_us']:.1f} µs | {micro['tiny_hooked_us']:.1f} µs "
        f"| {micro['tiny_hooked_us'] - micro['tiny_bare_us']:+.1f} µs/step |"
    )
    lines += _monitor_rows(figures.get("monitor"))
    machine, section = result["machine"], args.get("section", SECTION)
    gpu = f" and {result['gpu']} (each step waits for the GPU)" if result.get("gpu") else ""
    lines += [
        "",
        f"Measured {result['date']} on {machine['cpu_model']}, {machine['usable_cores']} usable "
        f"cores{gpu}; torch {result['versions'].get('torch')}, one intra-op thread; "
        f"{args['steps']} steps of batch {args['batch']}, first {args['warmup']} dropped, "
        f"hooks toggled every {args['toggle']} steps; median of {args['rounds']} interleaved "
        f"rounds. Raw samples: [results/{section}.json](results/{section}.json).",
    ]
    return "\n".join(lines)


def _monitor_rows(monitor: dict[str, Any] | None) -> list[str]:
    """The monitor's CPU cost, in percent of one core, beside a psutil loop of the same interval."""
    if monitor is None:
        return ["| system monitor's CPU (bench/_monitor_cost.py) | | | not measured in this run |"]
    median, steady = monitor["median_pct"], monitor["sidecar_steady_pct"]
    lines = [
        "",
        "| system monitor, CPU in % of one core | 100 ms | 500 ms | target |",
        "|---|---:|---:|---|",
    ]
    rows = (
        ("trainops monitor (sampling, chunks, meta)", "monitor", "≤ 1 % at 100 ms"),
        ("psutil loop, same metrics and interval (peer)", "psutil", ""),
        ("trainops sampler alone", "sampler", ""),
        ("idle thread on the same schedule (floor)", "idle", ""),
    )
    for label, kind, target in rows:
        cells = [f"{median.get(f'{kind}@{i}ms', float('nan')):.2f}" for i in (100, 500)]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {target} |")
    started = monitor.get("monitor_steady_pct", {})
    cells = [f"{started.get(f'monitor@{i}ms', float('nan')):.2f}" for i in (100, 500)]
    lines.append(
        f"| trainops monitor once started (its start left out) | {cells[0]} | {cells[1]} | |"
    )
    cells = [f"{steady.get(f'sidecar@{i}ms', float('nan')):.2f}" for i in (100, 500)]
    lines.append(
        f"| the whole sidecar (monitor + mirror to file://), steady | {cells[0]} | {cells[1]} | |"
    )
    met = "met" if monitor.get("target_met") else "missed"
    peers = ", ".join(
        f"{name.split(' (')[0]} {ms:,} ms" for name, ms in monitor["peers_granularity_ms"].items()
    )
    lines += [
        "",
        f"The monitor at 100 ms: {median['monitor@100ms']:.2f} % of a core ({met}); psutil at "
        f"the same interval {median['psutil@100ms']:.2f} %. Peers' sampling intervals: {peers}. "
        f"{monitor['rounds']} interleaved rounds of {monitor['seconds_per_run']:g} s per run.",
    ]
    return lines


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    samples: dict[str, list[dict[str, list[Any]]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="profiler-bench-") as temporary:
        workdir = Path(temporary)
        for round_number in range(args.rounds):
            order = MODES if round_number % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                samples[mode].append(run_mode(mode, workdir, args))
            print(f"round {round_number + 1}/{args.rounds} done", flush=True)
        micro = run_mode("micro", workdir, args)
    monitor = None
    if args.monitor_seconds > 0:
        from _monitor_cost import measure

        monitor = measure((100, 500), args.monitor_seconds, args.rounds)
    result = header(
        args.section, {k: v for k, v in vars(args).items() if k not in ("out", "readme")}
    )
    if args.device == "cuda":
        import torch

        result["gpu"] = torch.cuda.get_device_name(0)
    result["figures"] = summarize(samples, args)
    result["figures"]["micro_us"] = micro
    result["figures"]["monitor"] = monitor
    result["samples"] = samples
    publish(result, args.out, args.readme, args.section, render_table(result))


if __name__ == "__main__":
    main()
