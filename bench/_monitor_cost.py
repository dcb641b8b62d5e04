"""CPU cost of the system monitor at 100 ms and 500 ms, against a psutil loop at the same interval.

Each measurement is a fresh child process (``python _monitor_cost.py --child KIND MS SECONDS``)
that runs one thing on a thread for ``seconds`` while its main thread sleeps, and reports the
process's CPU time over that window (``time.process_time``, every thread) and the wall time;
start-up and imports are outside the window. Kinds:

- ``monitor``: :class:`trainops.monitor.SystemMonitor` as the agent's sidecar runs it (sampling,
  chunk encoding and writing into a temporary profiler tree, meta); ``monitor_steady_pct`` is the
  same run from the moment its start is done (the sampler open, NVML initialised on a GPU
  machine, the first meta written) to its stop: what a long job pays per second;
- ``sidecar``: the monitor plus the profiler sidecar's mirror of its tree to a ``file://``
  prefix (a :class:`~trainops.agent.reporting._sync.DirectorySync`: its uploader process's CPU time,
  start-up included, is added: the child waits for it and reads ``RUSAGE_CHILDREN``);
- ``uploader`` (once per round, not per interval): that uploader process alone, started on a
  directory with one file and stopped once the file is uploaded: the mirror's fixed cost, which
  ``sidecar_steady_pct`` takes off the sidecar's figure (what a long job pays per second);
- ``sampler``: :class:`trainops.monitor.SystemSampler` alone on the same schedule (the sampling
  part of the above, to compare with psutil like for like);
- ``psutil``: the psutil loop a monitor is usually built on: ``cpu_percent(percpu=True)``,
  ``cpu_times_percent()`` (for I/O wait), ``virtual_memory()``, ``disk_io_counters()``,
  ``net_io_counters()`` each tick, and on a machine with NVIDIA GPUs each GPU's utilization and
  memory through ``pynvml`` (as the monitor reads them), so the peer does the same work;
- ``idle``: the same child doing nothing (the floor of the measurement).

The kinds are interleaved (monitor, sampler, psutil, idle, then again, for each interval) for
``rounds`` rounds, so a change in the machine's load spreads over all of them. The figure is
percent of one core: CPU seconds / wall seconds x 100, the median over rounds (also net of
``idle`` at the same interval); the target is ≤ 1 % at 100 ms (the monitor's gross figure). :func:`measure` returns the result as a dict (bench/profiler_overhead.py calls
it); run alone, this prints it as JSON:

    python bench/_monitor_cost.py [--seconds 10] [--rounds 3] [--intervals 100,500] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

KINDS = ("monitor", "sidecar", "sampler", "psutil", "idle")
TARGET_PCT_AT_100MS = 1.0
#: Sampling intervals of the peers' system monitors (their documented defaults / finest).
PEERS_GRANULARITY_MS = {
    "SageMaker Debugger (system_monitor_interval_millis default; finest 100)": 500,
    "Determined profiler (sampling_interval default)": 1000,
    "MLflow system metrics (default sampling interval)": 10_000,
    "Ray (metrics_report_interval_ms export)": 10_000,
}


def measure(
    intervals: Sequence[int] = (100, 500), seconds: float = 10.0, rounds: int = 3
) -> dict[str, Any]:
    """Run every kind at every interval, interleaved, and return the result."""
    samples: dict[str, list[float]] = {}
    rows: dict[str, list[int]] = {}
    mirrored: dict[str, list[tuple[float, float]]] = {}  # sidecar runs: (CPU s, wall s)
    uploader_start: list[float] = []
    started: dict[str, list[float]] = {}  # monitor runs, once started: % of a core
    for _ in range(rounds):
        uploader_start.append(_child("uploader", 0, 0.0)["cpu_s"])
        for interval in intervals:
            for kind in KINDS:
                run = _child(kind, interval, seconds)
                key = f"{kind}@{interval}ms"
                samples.setdefault(key, []).append(100.0 * run["cpu_s"] / run["wall_s"])
                rows.setdefault(key, []).append(run["rows"])
                if kind == "sidecar":
                    mirrored.setdefault(key, []).append((run["cpu_s"], run["wall_s"]))
                if kind == "monitor":
                    started.setdefault(key, []).append(
                        100.0 * run["steady_cpu_s"] / max(run["steady_wall_s"], 1e-9)
                    )
    medians = {key: statistics.median(values) for key, values in samples.items()}
    monitor_100 = medians.get("monitor@100ms")
    start_cpu = statistics.median(uploader_start)
    steady = {
        key: statistics.median(100.0 * max(0.0, cpu - start_cpu) / wall for cpu, wall in runs)
        for key, runs in mirrored.items()
    }
    return {
        "benchmark": "monitor_cost",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "seconds_per_run": seconds,
        "rounds": rounds,
        "intervals_ms": list(intervals),
        "unit": "percent of one core (CPU s / wall s x 100)",
        "samples_pct": samples,
        "rows": rows,
        "median_pct": medians,
        "net_of_idle_pct": {
            key: value - medians[f"idle@{key.split('@')[1]}"]
            for key, value in medians.items()
            if not key.startswith("idle@")
        },
        # the mirror's uploader process costs this much CPU once (interpreter start, imports,
        # one upload): the sidecar's figure less it is what a long job pays per second
        "uploader_start_cpu_s": start_cpu,
        "sidecar_steady_pct": steady,
        # the monitor once its start is done (sampler open, NVML initialised, meta written):
        # what a long job pays; the start's CPU is in median_pct's figure
        "monitor_steady_pct": {key: statistics.median(v) for key, v in started.items()},
        "psutil_over_sampler": {
            f"{i}ms": _ratio(medians[f"psutil@{i}ms"], medians[f"sampler@{i}ms"]) for i in intervals
        },
        "target": {"monitor_at_100ms_pct": TARGET_PCT_AT_100MS},
        "target_met": None if monitor_100 is None else monitor_100 <= TARGET_PCT_AT_100MS,
        "peers_granularity_ms": PEERS_GRANULARITY_MS,
    }


def _ratio(over: float, under: float) -> float:
    return over / max(under, 1e-3)


def _machine() -> dict[str, Any]:
    try:
        from _report import machine  # bench/ is on sys.path when run from bench scripts
    except ImportError:
        return {}
    found: dict[str, Any] = machine()
    return found


def _child(kind: str, interval_ms: int, seconds: float) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", kind, str(interval_ms), str(seconds)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=seconds + 120)
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


# The child ------------------------------------------------------------------------------------


def child(kind: str, interval_ms: int, seconds: float) -> dict[str, Any]:
    """One measurement in this process (see the module docstring)."""
    if kind in ("monitor", "sidecar"):
        return _run_monitor(interval_ms, seconds, mirror=kind == "sidecar")
    if kind == "sampler":
        from trainops.monitor import SystemSampler

        sampler = SystemSampler()
        return _run_loop(sampler.row, interval_ms, seconds, sampler.close)
    if kind == "psutil":
        return _run_loop(_psutil_sample(), interval_ms, seconds, lambda: None)
    if kind == "idle":
        return _run_loop(None, interval_ms, seconds, lambda: None)
    if kind == "uploader":
        return _run_uploader()
    raise SystemExit(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")


def _run_monitor(interval_ms: int, seconds: float, *, mirror: bool) -> dict[str, Any]:
    from trainops._settings import Settings
    from trainops.agent.reporting._sync import DirectorySync
    from trainops.monitor import SystemMonitor
    from trainops.storage import store_for

    with tempfile.TemporaryDirectory() as folder:
        local, remote = Path(folder, "local"), Path(folder, "remote").as_uri()
        monitor = SystemMonitor(local, "bench", interval_ms=interval_ms)
        sync = None
        if mirror:
            store = store_for(remote, Settings(home=Path(folder)))
            sync = DirectorySync(local, remote, store, propagate_deletes=False)
        cpu, wall, children = time.process_time(), time.monotonic(), _children_cpu()
        monitor.start()
        if sync is not None:
            sync.start()
        monitor.ready.wait(timeout=seconds)  # its start done: the sampler open, meta written
        ready_cpu, ready_wall = time.process_time(), time.monotonic()
        time.sleep(max(0.0, seconds - (ready_wall - wall)))
        monitor.stop()
        steady_cpu, steady_wall = time.process_time() - ready_cpu, time.monotonic() - ready_wall
        if sync is not None:
            sync.final_sync()  # stops the uploader and waits for it: its CPU time is counted
        cpu = time.process_time() - cpu + _children_cpu() - children
        wall = time.monotonic() - wall
        return {
            "cpu_s": cpu,
            "wall_s": wall,
            "rows": monitor.rows,
            "steady_cpu_s": steady_cpu,  # this process only, from ready to stop
            "steady_wall_s": steady_wall,
        }


def _run_uploader() -> dict[str, Any]:
    """The fixed cost of the mirror: its uploader process started, one file uploaded, stopped."""
    from trainops._settings import Settings
    from trainops.agent.reporting._sync import DirectorySync
    from trainops.storage import store_for

    with tempfile.TemporaryDirectory() as folder:
        local, remote = Path(folder, "local"), Path(folder, "remote").as_uri()
        local.mkdir()
        Path(local, "meta.json").write_text("{}")
        sync = DirectorySync(
            local, remote, store_for(remote, Settings(home=Path(folder))), propagate_deletes=False
        )
        wall, children = time.monotonic(), _children_cpu()
        sync.start()
        deadline = time.monotonic() + 60
        while not sync.known and time.monotonic() < deadline:
            time.sleep(0.01)
        sync.stop()
        children = _children_cpu() - children
        return {"cpu_s": children, "wall_s": time.monotonic() - wall, "rows": len(sync.known)}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _psutil_sample() -> Callable[[], object]:
    import psutil

    psutil.cpu_percent(percpu=True)
    psutil.cpu_times_percent()
    gpus = _gpu_reader()

    def sample() -> object:
        return (
            time.time(),
            psutil.cpu_percent(percpu=True),
            psutil.cpu_times_percent(),
            psutil.virtual_memory(),
            psutil.disk_io_counters(),
            psutil.net_io_counters(),
            gpus(),
        )

    return sample


def _gpu_reader() -> Callable[[], list[tuple[object, object]]]:
    """Each NVIDIA GPU's utilization and memory through pynvml (nothing where pynvml, the
    driver or a GPU is missing)."""
    try:
        nvml: Any = importlib.import_module("pynvml")
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    except Exception:  # no pynvml, no driver, no GPU: the peer reads what the machine has
        return list
    utilization, memory = nvml.nvmlDeviceGetUtilizationRates, nvml.nvmlDeviceGetMemoryInfo
    return lambda: [(utilization(h), memory(h)) for h in handles]


def _run_loop(
    sample: Callable[[], object] | None,
    interval_ms: int,
    seconds: float,
    close: Callable[[], None],
) -> dict[str, Any]:
    """``sample`` on a thread on the monitor's schedule; rows are kept, as a monitor would."""
    stop = threading.Event()
    kept: list[object] = []

    def loop() -> None:
        interval, began, tick = interval_ms / 1000.0, time.monotonic(), 1
        while not stop.wait(max(0.0, began + tick * interval - time.monotonic())):
            if sample is not None:
                kept.append(sample())
            tick = max(tick + 1, int((time.monotonic() - began) / interval) + 1)

    thread = threading.Thread(target=loop)
    cpu, wall = time.process_time(), time.monotonic()
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join()
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    close()
    return {"cpu_s": cpu, "wall_s": wall, "rows": len(kept)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--intervals", default="100,500")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", nargs=3, metavar=("KIND", "MS", "SECONDS"))
    args = parser.parse_args(argv)
    if args.child:
        kind, interval, seconds = args.child
        print(json.dumps(child(kind, int(interval), float(seconds))))
        return 0
    intervals = [int(v) for v in args.intervals.split(",")]
    result = measure(intervals, args.seconds, args.rounds)
    text = json.dumps(result, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
