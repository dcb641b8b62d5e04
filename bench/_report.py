"""The launch-overhead result: machine, versions, samples, medians, overheads, ratios, targets.

:func:`build_result` computes the figures; :func:`write_json` and :func:`update_readme` render
them (the JSON file keeps every raw sample; the README keeps one table between markers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

TARGETS = {"trainops_warm_overhead_s": 0.15, "trainops_cold_overhead_s": 0.5, "ray_ratio": 3.0}
PATHS = {
    "bare": "bare `python hello.py`",
    "trainops_cold": "`trainops run hello.yaml`, cold (embedded server)",
    "trainops_warm": "`trainops run hello.yaml`, warm (`trainops server` running)",
    "ray_cold": 'Ray Train `TorchTrainer`, cold (`ray.init(address="local")` in the process)',
    "ray_warm": "Ray Train `TorchTrainer`, warm (`ray start --head` running)",
}


def machine() -> dict[str, Any]:
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("trainops", "ray", "torch"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def build_result(
    samples: dict[str, list[float]], runs: int, stragglers: dict[str, int]
) -> dict[str, Any]:
    medians = {name: statistics.median(times) for name, times in samples.items()}
    bare = medians["bare"]
    overheads = {name: m - bare for name, m in medians.items() if name != "bare"}
    ratios = {
        mode: _ratio(overheads.get(f"ray_{mode}"), overheads.get(f"trainops_{mode}"))
        for mode in ("cold", "warm")
    }
    return {
        "benchmark": "launch_overhead",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": runs,
        "warmup_runs": 1,
        "machine": machine(),
        "versions": versions(),
        "samples_s": samples,
        "median_s": medians,
        "overhead_s": overheads,
        "ratio_ray_over_trainops": ratios,
        "targets": TARGETS,
        "targets_met": _targets_met(overheads, ratios),
        "not_measured": sorted(set(PATHS) - set(samples)),
        # Processes still alive after a cold run returned (stopped by the benchmark).
        "stragglers_stopped": stragglers,
    }


def _ratio(ray: float | None, trainops: float | None) -> float | None:
    if ray is None or trainops is None:
        return None
    # An overhead within timer noise of zero would make the ratio meaningless or negative.
    return ray / max(trainops, 0.001)


def _targets_met(overheads: dict[str, float], ratios: dict[str, float | None]) -> dict[str, Any]:
    warm, cold = overheads.get("trainops_warm"), overheads.get("trainops_cold")
    return {
        "trainops_warm_overhead": None
        if warm is None
        else warm <= TARGETS["trainops_warm_overhead_s"],
        "trainops_cold_overhead": None
        if cold is None
        else cold <= TARGETS["trainops_cold_overhead_s"],
        "ray_ratio_cold": None
        if ratios["cold"] is None
        else ratios["cold"] >= TARGETS["ray_ratio"],
        "ray_ratio_warm": None
        if ratios["warm"] is None
        else ratios["warm"] >= TARGETS["ray_ratio"],
    }


def write_json(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n")
    tmp.replace(path)


def render_table(result: dict[str, Any]) -> str:
    medians, overheads = result["median_s"], result["overhead_s"]
    target = {
        "trainops_cold": f"≤ {TARGETS['trainops_cold_overhead_s']} s",
        "trainops_warm": f"≤ {TARGETS['trainops_warm_overhead_s']} s",
    }
    rows = ["| path | median (s) | overhead vs bare (s) | target |", "|---|---:|---:|---|"]
    for name, label in PATHS.items():
        if name not in medians:
            rows.append(f"| {label} | not measured | | {target.get(name, '')} |")
            continue
        over = "" if name == "bare" else f"{overheads[name]:.3f}"
        rows.append(f"| {label} | {medians[name]:.3f} | {over} | {target.get(name, '')} |")
    for mode, ratio in result["ratio_ray_over_trainops"].items():
        shown = "not measured" if ratio is None else f"{ratio:.1f}x"
        rows.append(f"| Ray overhead / trainops overhead, {mode} | {shown} | | ≥ 3x |")
    m, v = result["machine"], result["versions"]
    rows.append("")
    rows.append(
        f"Measured {result['date']} on {m['cpu_model']}, {m['usable_cores']} usable cores, "
        f"{m['memory_gib']} GiB; Python {v['python']}, trainops {v['trainops']}, "
        f"ray {v['ray']}, torch {v['torch']}; median of {result['runs']} interleaved rounds after 1 warm-up round. "
        "Raw samples: [results/launch_overhead.json](results/launch_overhead.json)."
    )
    return "\n".join(rows)


def update_readme(result: dict[str, Any], readme: Path) -> None:
    """Replace the launch-overhead table in ``readme`` with the latest one."""
    update_section(readme, "launch_overhead", render_table(result))


def update_section(readme: Path, name: str, table: str) -> None:
    """Replace the text between ``<!-- name:begin -->`` and ``<!-- name:end -->`` in ``readme``."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = readme.read_text(encoding="utf-8")
    head, sep_begin, rest = text.partition(begin)
    _old, sep_end, tail = rest.partition(end)
    if not sep_begin or not sep_end:
        raise SystemExit(f"{readme}: markers {begin} and {end} not found")
    readme.write_text(f"{head}{begin}\n{table}\n{end}{tail}", encoding="utf-8")


def positive(text: str) -> int:
    """An argument that must be a whole number from 1 (argparse says which one it is not)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number from 1")
    return value
