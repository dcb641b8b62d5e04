"""Debugger rule lag: from a tensor's step on storage to the live rule's verdict.

A real job (``trainops run``, embedded server) writes gradients with the job-side writer
(``TensorFileWriter``), one step every ``--step-ms``, saving every ``--intervals``-th step,
either straight into its debug-output prefix (``direct``) or into the host's tensors directory
(the hook config's ``LocalPath``) that the host's agent syncs to the prefix every second
(``synced``: the whole path); from step 200 on its gradients vanish. The debugger-rules service
evaluates VanishingGradient on the steps as they arrive and stops the job. The lag is the
rule's ``found_time`` (when the control plane recorded the finding) minus the wall time at
which the script finished writing the first vanishing step it saved. Target (issue 22): at most
2 s plus the save interval. ``--rounds`` runs per save interval, interleaved. ``--baseline SRC``
adds a third path, ``synced`` run with the trainops sources at ``SRC`` (an earlier commit's
``src``, e.g. from ``git archive``), interleaved with the others; ``--load N`` keeps N busy
processes spinning during the runs (a loaded machine, reproducibly).

    python bench/debugger_rule_lag.py [--rounds 3] [--intervals 1,20] [--step-ms 20]
        [--baseline SRC] [--load N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from _report import machine, update_section, versions, write_json

from trainops.store import MetadataStore

BENCH = Path(__file__).resolve().parent
TARGET_S = 2.0
SCRIPT = """
import sys, time
import numpy as np
from pathlib import Path
from trainops.debugger import Collection, CollectionManager
from trainops.debugger.format import TensorFileWriter

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
every, pause = int(args["--every"]), float(args["--step-ms"]) / 1000
if args["--tensors"] == "hook":  # the host's tensors dir, synced to the prefix by its agent
    import os
    from trainops.debugger import load_hook_config
    out = Path(load_hook_config(os.environ["SMDEBUG_CONFIG_FILE_PATH"]).local_path)
else:
    out = Path(args["--tensors"])
writer = TensorFileWriter(out, "worker_0")
writer.write_collections(CollectionManager([Collection("gradients", ["^gradient/.*"])]), 1)
for step in range(100000):
    if step % every == 0:
        scale = 1e-12 if step >= 200 else 0.1
        writer.write_step(step, "TRAIN", step, [("gradient/fc.weight", np.full((64, 64), scale, np.float32))])
        if step >= 200:
            print(f"LAG-MARK {time.time():.6f}", flush=True)
            break
    time.sleep(pause)
for step in range(100000):
    time.sleep(pause)  # keep training (no more saves) until stopped
"""


def run_once(
    folder: Path, every: int, step_ms: float, synced: bool, src: str | None = None
) -> float:
    """One job (with the trainops sources at ``src`` if given); the lag in seconds."""
    folder.mkdir(parents=True)
    (folder / "src").mkdir()
    (folder / "src" / "train.py").write_text(SCRIPT)
    output = folder / "out"
    spec = {
        "job_name": "lag",
        "entry_point": "train.py",
        "source_dir": "src",
        "output_path": output.as_uri(),
        "hyperparameters": {
            "tensors": "hook" if synced else str(output / "lag" / "debug-output"),
            "every": every,
            "step-ms": step_ms,
        },
        "rules": [{"rule": "VanishingGradient", "actions": ["stop_training"]}],
        "stopping_condition": {"grace_period_in_seconds": 5},
    }
    (folder / "job.yaml").write_text(yaml.safe_dump(spec))
    home = folder / "home"
    home.mkdir()
    env = {"TRAINOPS_HOME": str(home), "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "trainops.cli", "run", str(folder / "job.yaml")],
        env={**env, **({"PYTHONPATH": src} if src else _pythonpath())},
        capture_output=True,
        text=True,
        timeout=600,
    )
    marks = [line for line in run.stdout.splitlines() if "LAG-MARK " in line]
    if not marks:
        raise SystemExit(f"the job wrote no vanishing step:\n{run.stdout}\n{run.stderr}")
    written = float(marks[0].split("LAG-MARK ")[1].split()[0])
    store = MetadataStore(home / "trainops.db")
    try:
        row = {r.name: r for r in store.rule_evaluations("lag")}["VanishingGradient"]
    finally:
        store.close()
    return float(row.result["found_time"]) - written


def _pythonpath() -> dict[str, str]:
    found = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": found} if found else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--intervals", default="1,20")
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--baseline", help="trainops sources to run a synced baseline with")
    parser.add_argument("--load", type=int, default=0, help="busy processes during the runs")
    args = parser.parse_args()
    intervals = [int(i) for i in args.intervals.split(",")]
    paths = ("direct", "synced", *(("synced-baseline",) if args.baseline else ()))
    cases = [(path, every) for every in intervals for path in paths]
    lags: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
    loads: list[float] = []
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="rule-lag-") as scratch:
            for round_ in range(args.rounds):
                for path, every in cases:
                    folder = Path(scratch) / f"{round_}-{path}-{every}"
                    src = args.baseline if path == "synced-baseline" else None
                    lag = run_once(folder, every, args.step_ms, path != "direct", src)
                    lags[(path, every)].append(lag)
                    loads.append(os.getloadavg()[0])
                    print(f"{path}, save_interval {every}: lag {lag:.3f} s", flush=True)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    result = _result(lags, args.step_ms)
    result |= {"busy_processes": args.load, "load_average_after_each_run": loads}
    write_json(result, BENCH / "results" / "debugger_rule_lag.json")
    update_section(BENCH / "README.md", "Debugger rule lag", _table(result))
    print(_table(result))


def _result(lags: dict[tuple[str, int], list[float]], step_ms: float) -> dict[str, Any]:
    rows = {}
    for (path, every), values in lags.items():
        interval_s = every * step_ms / 1000
        median = statistics.median(values)
        rows[f"{path}-{every}"] = {
            "path": path,
            "save_interval_steps": every,
            "save_interval_s": interval_s,
            "lag_s": [round(v, 3) for v in values],
            "median_lag_s": round(median, 3),
            "target_s": round(TARGET_S + interval_s, 3),
            "met": median <= TARGET_S + interval_s,
        }
    return {
        "benchmark": "debugger_rule_lag",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "step_ms": step_ms,
        "rows": rows,
    }


def _table(result: dict[str, Any]) -> str:
    lines = [
        "| path | save interval | median lag (s) | runs (s) | target (s) | met |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["rows"].values():
        lines.append(
            f"| {row['path']} | {row['save_interval_steps']} steps ({row['save_interval_s']:.2f} s) | "
            f"{row['median_lag_s']:.2f} | {', '.join(f'{v:.2f}' for v in row['lag_s'])} | "
            f"≤ {row['target_s']:.2f} | {'yes' if row['met'] else 'no'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
