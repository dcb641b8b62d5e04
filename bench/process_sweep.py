"""What killing every process a job started costs at the end of each script (and of each stop).

Three paths run the same command (``python -c pass``) through the agent's ``ScriptProcess``
machinery, interleaved (A, B, C, A, B, C, ...), one warm-up round then ``--runs`` timed rounds:

- group:  start in a session of its own, SIGKILL the group at the end (what the agent did before
          the process tree existed), via ``subprocess.Popen`` directly;
- sweep:  ``ScriptProcess(use_cgroup=False)``: the group plus the environment-marker sweep over
          every process of this user;
- cgroup: ``ScriptProcess()`` as the agent runs it: a cgroup v2 of its own where one can be
          made, plus the sweep.

Added cost = median(path) - median(group); the figure is that cost against the warm launch
overhead budget (0.5 s, bench/launch_overhead.py), measured on this machine with the number of
processes it had. Results go to bench/results/process_sweep.json.

    python bench/process_sweep.py [--runs 30]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from trainops.agent import ScriptProcess
from trainops.agent.supervision._reaper import ProcessTree

WARM_BUDGET_S = 0.5
COMMAND = [sys.executable, "-c", "pass"]
RESULT = Path(__file__).with_name("results") / "process_sweep.json"


def _group(work: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(
        COMMAND,
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    proc.communicate()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return time.perf_counter() - started


def _script_process(work: Path, use_cgroup: bool) -> float:
    started = time.perf_counter()
    process = ScriptProcess(
        COMMAND, cwd=work, env=dict(os.environ), on_line=_ignore, use_cgroup=use_cgroup
    )
    process.start()
    process.finish()
    return time.perf_counter() - started


def _ignore(_stream: str, _line: str, _ts: float) -> None:
    """Nothing to print."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    probe = ProcessTree("trainops/bench-probe")
    cgroup_available = probe.cgroup is not None
    probe.kill_all()
    paths = {
        "group": _group,
        "sweep": lambda w: _script_process(w, use_cgroup=False),
        "cgroup": lambda w: _script_process(w, use_cgroup=True),
    }
    samples: dict[str, list[float]] = {name: [] for name in paths}
    with tempfile.TemporaryDirectory(prefix="trainops-bench-") as tmp:
        work = Path(tmp)
        for round_ in range(args.runs + 1):
            for name, path in paths.items():  # interleaved: A, B, C, A, B, C, ...
                elapsed = path(work)
                if round_ > 0:
                    samples[name].append(elapsed)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    added = {name: medians[name] - medians["group"] for name in ("sweep", "cgroup")}
    result = {
        "benchmark": "process_sweep",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": args.runs,
        "processes_on_machine": len(psutil.pids()),
        "cgroup_available": cgroup_available,
        "samples_s": samples,
        "median_s": medians,
        "added_s": added,
        "added_vs_warm_budget": {k: v / WARM_BUDGET_S for k, v in added.items()},
    }
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{len(psutil.pids())} processes on this machine; cgroup v2: {cgroup_available}")
    print(f"{'path':8} {'median ms':>10} {'added ms':>9} {'of 0.5 s budget':>16}")
    for name in paths:
        extra = added.get(name)
        shown = "" if extra is None else f"{extra * 1e3:9.1f} {extra / WARM_BUDGET_S:15.1%}"
        print(f"{name:8} {medians[name] * 1e3:10.1f} {shown}")
    print(f"wrote {RESULT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
