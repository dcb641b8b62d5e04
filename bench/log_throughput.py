"""Log throughput: what ``trainops run`` costs a script that prints a lot, next to a bare pipe.

The script (bench/logs/chatty.py) prints ``--lines`` short lines (default 200,000), each matched
by the job's two metric definitions, and measures its own wall time. Two paths, interleaved
(bare, trainops, bare, trainops, ...) for ``--rounds`` rounds after one warm-up round:

- bare:     ``python chatty.py`` with stdout to a pipe that this process drains
- trainops: ``trainops run chatty.yaml`` (embedded server), in a fresh ``TRAINOPS_HOME``

For each trainops run it measures the time from the script's end to the moment the job is
Completed in the store (polled every 0.05 s, read only) and to its billed end
(``TrainingEndTime``), counts the log lines and metric points stored against the numbers
expected, and polls the agent's peak RSS (``VmHWM``).
Results go to bench/results/log_throughput.json and a table in bench/README.md.

With ``--observe`` the job also has ``profiler_config`` (the system monitor at 100 ms) and
``tensorboard_output_config`` (every scraped metric point also written as a TensorBoard scalar
and synced while the job runs): what observation adds on the log path, against the same bare
pipe in the same run, and each round also runs the job without TensorBoard (the monitor alone),
so what TensorBoard adds to the job's end is measured interleaved. Its figures go to results/log_throughput_observed.json and a section of
their own.

    python bench/log_throughput.py [--lines 200000] [--rounds 3] [--observe]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from _processes import ProcessSweeper, compile_trainops, tool
from _report import machine, versions, write_json

from trainops.store import MetadataStore

BENCH = Path(__file__).resolve().parent
SCRIPT_DIR = BENCH / "logs"
TARGETS = {"wall_ratio": 1.1, "completed_after_exit_s": 1.0}
SPEC = """\
base_job_name: chatty
entry_point: chatty.py
source_dir: {source}
instance_type: ml.m5.large
environment:
  BENCH_RESULT: {result}
  BENCH_LINES: "{lines}"
  BENCH_HOSTILE: "{hostile}"
metric_definitions:
  - name: loss
    regex: "loss=([0-9.]+)"
  - name: acc
    regex: "acc=([0-9.]+)"
stopping_condition:
  max_runtime_in_seconds: 600
"""
MONITOR = """\
profiler_config:
  system_monitor_interval_millis: 100
"""
OBSERVE = MONITOR + "tensorboard_output_config: {}\n"
#: Index offset of the runs without TensorBoard (--observe), so their files are apart.
NO_TENSORBOARD = 1000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000, help="lines the script prints")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per run")
    parser.add_argument("--out", type=Path, help="default: results/<section>.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    parser.add_argument(
        "--observe", action="store_true", help="with the system monitor and TensorBoard output"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.lines < 1:
        parser.error("--rounds and --lines must be at least 1")
    return args


def clean_env() -> dict[str, str]:
    drop = ("TRAINOPS_", "AWS_", "SM_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def last_result(path: Path) -> dict[str, float]:
    lines = path.read_text(encoding="utf-8").splitlines()
    result: dict[str, float] = json.loads(lines[-1])
    return result


def run_bare(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    result = workdir / "bare.jsonl"
    # The same interpreter settings as the script gets under trainops (unbuffered output).
    env = {
        **clean_env(),
        "BENCH_RESULT": str(result),
        "BENCH_LINES": str(args.lines),
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT_DIR / "chatty.py")], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    lines = 0
    while chunk := proc.stdout.read1(256 * 1024):
        lines += chunk.count(b"\n")
    if proc.wait(args.timeout) != 0 or lines != args.lines:
        raise RuntimeError(f"bare run failed: exit {proc.returncode}, {lines} lines")
    return last_result(result)


class Watcher:
    """Polls, every 0.05 s, the peak RSS (VmHWM) of every ``trainops.agent`` process under
    ``root`` and the job's status in the store (read only), noting when it became Completed."""

    def __init__(self, root: int, db: Path) -> None:
        self.root = root
        self.db = db
        self.peak_kib = 0
        self.completed_at: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        if self.completed_at is None and self._completed():  # a bound from above, as in _poll
            self.completed_at = time.time()
        return self.peak_kib

    def _poll(self) -> None:
        while not self._done.wait(0.02):
            if self.completed_at is None and self._completed():
                self.completed_at = time.time()
            try:
                children = psutil.Process(self.root).children(recursive=True)
            except psutil.Error:
                # `trainops run` is gone, maybe less than a poll after the job completed: the
                # time of this last look is a bound from above.
                if self.completed_at is None and self._completed():
                    self.completed_at = time.time()
                return
            for child in children:
                try:
                    if "trainops.agent" not in " ".join(child.cmdline()):
                        continue
                    status = Path(f"/proc/{child.pid}/status").read_text()
                except (psutil.Error, OSError):
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))

    def _completed(self) -> bool:
        if not self.db.exists():
            return False
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)) as conn:
                row = conn.execute("SELECT status FROM jobs").fetchone()
        except sqlite3.Error:
            return False
        return row is not None and row[0] == "Completed"


def run_trainops(
    args: argparse.Namespace,
    workdir: Path,
    index: int,
    sweeper: ProcessSweeper,
    *,
    hostile: bool = False,
    tensorboard: bool = True,
) -> dict[str, Any]:
    """One ``trainops run``; with ``--observe``, ``tensorboard=False`` leaves TensorBoard out
    (the monitor alone)."""
    home = workdir / f"home-{index}"
    result = workdir / f"trainops-{index}.jsonl"
    spec = workdir / f"chatty-{index}.yaml"
    text = SPEC.format(source=SCRIPT_DIR, result=result, lines=args.lines, hostile=int(hostile))
    observed = (OBSERVE if tensorboard else MONITOR) if args.observe else ""
    spec.write_text(text + observed)
    env = {**clean_env(), "TRAINOPS_HOME": str(home)}
    proc = subprocess.Popen(
        [*tool("trainops"), "run", str(spec)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=sweeper.env(env),
    )
    watcher = Watcher(proc.pid, home / "trainops.db")
    try:
        _out, err = proc.communicate(timeout=args.timeout)
    finally:
        peak = watcher.stop()
        sweeper.stop_all()
    if proc.returncode != 0:
        raise RuntimeError(f"trainops run failed ({proc.returncode}): {err.decode()[-2000:]}")
    script = last_result(result)
    store = MetadataStore(home / "trainops.db")
    try:
        (job,) = store.list_jobs()
        logs = store.logs(job.name, limit=10 * args.lines)
        stdout_lines = sum(1 for line in logs if line.stream == "stdout")
        points = len(store.metrics(job.name))
        hostile_checks = check_hostile(logs, store.artifacts(job.name)) if hostile else {}
    finally:
        store.close()
    if job.training_end_time is None or watcher.completed_at is None:
        raise RuntimeError(f"the job ended {job.status}, not Completed")
    return {
        **script,
        "completed_after_exit_s": watcher.completed_at - script["finished_at"],
        "billed_end_after_exit_s": job.training_end_time - script["finished_at"],
        "status": job.status,
        "log_lines": stdout_lines,
        "metric_points": points,
        "agent_peak_rss_mib": round(peak / 1024, 1),
        **hostile_checks,
    }


def check_hostile(logs: list[Any], artifacts: list[Any]) -> dict[str, Any]:
    """What became of the 10 MiB line, the random bytes and the last line without a newline."""
    big = 10 * 1024 * 1024
    stdout = [line.line for line in logs if line.stream == "stdout"]
    long = next((line for line in stdout if line.startswith("xxxx")), "")
    [log_uri] = [a.uri for a in artifacts if a.name == "log"]
    uploaded = Path(log_uri.removeprefix("file://")).read_bytes()
    return {
        "long_line_stored_chars": len(long),
        "long_line_marked": long.endswith(f"of {big} characters]"),
        "long_line_whole_in_uploaded_log": b"\n" + b"x" * big + b"\n" in uploaded,
        "last_line_without_newline_stored": stdout[-1:] == ["the end, without a newline"],
        "random_bytes_lines_stored": len(stdout) - 2,
    }


def build_result(
    args: argparse.Namespace, bare: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    bare_wall = statistics.median(r["wall_s"] for r in bare)
    wall = statistics.median(r["wall_s"] for r in runs)
    completed = statistics.median(r["completed_after_exit_s"] for r in runs)
    counts_ok = all(
        r["log_lines"] == args.lines and r["metric_points"] == 2 * args.lines for r in runs
    )
    return {
        "benchmark": section_of(args),
        "observe": args.observe,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "lines": args.lines,
        "rounds": args.rounds,
        "warmup_rounds": 1,
        "machine": machine(),
        "versions": versions(),
        "bare": bare,
        "trainops": runs,
        "median_bare_wall_s": bare_wall,
        "median_trainops_wall_s": wall,
        "wall_ratio": wall / bare_wall,
        "median_completed_after_exit_s": completed,
        # The script blocked on a full pipe (voluntary) or lost its CPU to others (involuntary).
        "median_voluntary_switches": {
            "bare": statistics.median(r["voluntary_switches"] for r in bare),
            "trainops": statistics.median(r["voluntary_switches"] for r in runs),
        },
        "median_involuntary_switches": {
            "bare": statistics.median(r["involuntary_switches"] for r in bare),
            "trainops": statistics.median(r["involuntary_switches"] for r in runs),
        },
        "median_billed_end_after_exit_s": statistics.median(
            r["billed_end_after_exit_s"] for r in runs
        ),
        "max_agent_peak_rss_mib": max(r["agent_peak_rss_mib"] for r in runs),
        "expected": {"log_lines": args.lines, "metric_points": 2 * args.lines},
        "targets": TARGETS,
        "targets_met": {
            "wall_ratio": wall / bare_wall <= TARGETS["wall_ratio"],
            "completed_after_exit": completed <= TARGETS["completed_after_exit_s"],
            "every_line_and_point_stored": counts_ok,
        },
    }


def _yes(value: bool) -> str:
    return "yes" if value else "**no**"


def render_table(result: dict[str, Any]) -> str:
    runs, hostile = result["trainops"], result["hostile_output"]
    vol, invol = result["median_voluntary_switches"], result["median_involuntary_switches"]
    stored = f"{min(r['log_lines'] for r in runs)} / {result['expected']['log_lines']}"
    points = f"{min(r['metric_points'] for r in runs)} / {result['expected']['metric_points']}"
    rows = [
        "| figure | measured | target |",
        "|---|---:|---|",
        f"| script wall time, bare pipe (median s) | {result['median_bare_wall_s']:.3f} | |",
        f"| script wall time, `trainops run` (median s) | {result['median_trainops_wall_s']:.3f} | |",
        f"| ratio trainops / bare | {result['wall_ratio']:.2f}x | ≤ 1.1x |",
        f"| script waits for its pipe (voluntary context switches, median bare / trainops)"
        f" | {vol['bare']:.0f} / {vol['trainops']:.0f} | |",
        f"| script loses its CPU to others (involuntary switches, median bare / trainops)"
        f" | {invol['bare']:.0f} / {invol['trainops']:.0f} | |",
        f"| script exit → Completed (median s) | {result['median_completed_after_exit_s']:.2f} | ≤ 1 s |",
        *(
            [
                f"| script exit → Completed, same job without TensorBoard (median s, interleaved)"
                f" | {result['median_completed_after_exit_without_tensorboard_s']:.2f} | |"
            ]
            if "without_tensorboard" in result
            else []
        ),
        f"| script exit → billed end (median s) | {result['median_billed_end_after_exit_s']:.2f} | |",
        f"| stdout lines stored (fewest of the runs) | {stored} | all |",
        f"| metric points stored (fewest of the runs) | {points} | all |",
        f"| agent peak RSS (MiB, largest) | {result['max_agent_peak_rss_mib']:.0f} | bounded |",
        f"| 10 MiB line: stored cut at 1 MiB with a marker | {_yes(hostile['long_line_marked'])}"
        " | yes |",
        f"| 10 MiB line: whole in the uploaded log | {_yes(hostile['long_line_whole_in_uploaded_log'])}"
        " | yes |",
        f"| random bytes and a last line without newline: job Completed, last line stored"
        f" | {_yes(hostile['status'] == 'Completed' and hostile['last_line_without_newline_stored'])}"
        " | yes |",
        "",
        f"Measured {result['date']}: {result['lines']} lines, median of {result['rounds']}"
        f" interleaved rounds after 1 warm-up, on {result['machine']['cpu_model']}"
        f" ({result['machine']['usable_cores']}"
        f" usable cores), Python {result['versions']['python']}."
        + (
            " The job also ran the system monitor at 100 ms and wrote every metric point as a"
            " TensorBoard scalar."
            if result.get("observe")
            else ""
        )
        + f" Raw samples: [results/{result['benchmark']}.json](results/{result['benchmark']}.json).",
    ]
    return "\n".join(rows)


def section_of(args: argparse.Namespace) -> str:
    return "log_throughput_observed" if args.observe else "log_throughput"


def update_readme(result: dict[str, Any], readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    section = result["benchmark"]
    begin, end = f"<!-- {section}:begin -->", f"<!-- {section}:end -->"
    table = f"{begin}\n{render_table(result)}\n{end}"
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = head + table + tail
    else:
        title = "Log throughput, observed" if result.get("observe") else "Log throughput"
        text = text.rstrip("\n") + f"\n\n## {title}\n\n" + table + "\n"
    readme.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.out is None:
        args.out = BENCH / "results" / f"{section_of(args)}.json"
    compile_trainops()  # as an installed package is (see _processes.compile_trainops)
    workdir = Path(tempfile.mkdtemp(prefix="tob-logs-", dir="/tmp"))
    sweeper = ProcessSweeper()
    bare: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    no_tensorboard: list[dict[str, Any]] = []
    try:
        for index in range(args.rounds + 1):
            b = run_bare(args, workdir)
            t = run_trainops(args, workdir, index, sweeper)
            print(
                f"round {index}{' (warm-up)' if index == 0 else ''}: bare {b['wall_s']:.3f} s,"
                f" trainops {t['wall_s']:.3f} s, Completed {t['completed_after_exit_s']:.2f} s"
                f" after exit, {t['log_lines']} lines, {t['metric_points']} points,"
                f" agent peak {t['agent_peak_rss_mib']} MiB",
                flush=True,
            )
            if args.observe:  # the same, without TensorBoard: what it adds, interleaved
                n = run_trainops(args, workdir, NO_TENSORBOARD + index, sweeper, tensorboard=False)
                print(f"  without TensorBoard: Completed {n['completed_after_exit_s']:.2f} s after"
                      f" exit, {n['metric_points']} points", flush=True)  # fmt: skip
                if index > 0:
                    no_tensorboard.append(n)
            if index > 0:
                bare.append(b)
                runs.append(t)
        # Not timed: a 10 MiB line, random bytes and a last line without a newline.
        hostile = run_trainops(args, workdir, args.rounds + 1, sweeper, hostile=True)
        print(f"hostile output: {json.dumps(hostile)}", flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"log_throughput: {exc}", file=sys.stderr)
        return 1
    finally:
        sweeper.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    result = build_result(args, bare, runs)
    result["hostile_output"] = hostile
    if no_tensorboard:
        result["without_tensorboard"] = no_tensorboard
        result["median_completed_after_exit_without_tensorboard_s"] = statistics.median(
            r["completed_after_exit_s"] for r in no_tensorboard
        )
    write_json(result, args.out)
    update_readme(result, args.readme)
    print(render_table(result))
    print(f"wrote {args.out} and the table in {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
