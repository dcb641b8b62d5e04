"""Submission throughput: jobs per minute when many short jobs arrive at once at a running server.

Tuning jobs and scaling studies launch hundreds of short jobs, so the control plane must turn
them over quickly and never lose one. One ``trainops server`` is started on a loopback port and
kept for the whole run; each round submits ``--jobs`` copies of the hello job at the same moment
and waits until every one has ended. Two ways of submitting are measured, interleaved round by
round:

- api: one process, ``--jobs`` threads each calling ``submit_job`` (what a tuner does)
- cli: ``--jobs`` ``trainops submit hello.yaml`` processes started together (what a shell loop
       or CI matrix does; every process pays for Python's start-up and the CLI's imports)

The limit the figures are set against is the bare script run back to back in this process's
child processes, as many at a time as the server runs jobs at a time (``bare``): what the machine
can do without trainops at all. jobs/min = jobs / (last job's end - first submission) x 60.
A job counts as failed when its submission raised or exited non-zero, or it did not end Completed.

    python bench/submit_rate.py [--jobs 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _processes import (
    BenchError,
    ProcessSweeper,
    compile_trainops,
    free_port,
    http_ok,
    tool,
    wait_until,
)
from _report import machine, update_section, versions, write_json

BENCH = Path(__file__).resolve().parent
HELLO = BENCH / "hello"
TARGET_JOBS_PER_MIN = 500.0
TERMINAL = {"Completed", "Failed", "Stopped"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50, help="jobs submitted at once (default 50)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per path (default 3)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed per round")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "submit_rate.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds must be at least 1")
    return args


def clean_env() -> dict[str, str]:
    drop = ("TRAINOPS_", "AWS_", "RAY_", "SM_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


@contextmanager
def trainops_server(sweeper: ProcessSweeper, home: Path, workdir: Path) -> Iterator[str]:
    port = free_port()
    argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
    log = workdir / "trainops-server.log"
    proc = sweeper.spawn(argv, {**clean_env(), "TRAINOPS_HOME": str(home)}, log)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{url}/api/v1/health"), "trainops server", proc, log, 60)
        yield url
    finally:
        sweeper.stop_all()


class Round:
    """One round: when it started, which jobs were submitted, which submissions failed."""

    def __init__(self) -> None:
        self.start = time.time()
        self.names: list[str] = []
        self.failed_submissions: list[str] = []
        self._lock = threading.Lock()

    def submitted(self, name: str) -> None:
        with self._lock:
            self.names.append(name)

    def failed(self, why: str) -> None:
        with self._lock:
            self.failed_submissions.append(why)


def submit_via_api(jobs: int, env: dict[str, str]) -> Round:
    from trainops._settings import Settings
    from trainops.client import connect, submit_job
    from trainops.spec import load_spec

    os.environ.update(env)
    settings = Settings.load()
    spec = load_spec(HELLO / "hello.yaml")
    result = Round()

    def one(_: int) -> None:
        try:
            with connect(settings) as client:
                result.submitted(submit_job(client, spec, settings, base_dir=HELLO, progress=False))
        except Exception as exc:  # a failed submission is a result, not a crash
            result.failed(f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, range(jobs)))
    return result


def submit_via_cli(jobs: int, env: dict[str, str]) -> Round:
    result = Round()
    argv = [*tool("trainops"), "submit", str(HELLO / "hello.yaml")]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(jobs)
    ]
    for proc in procs:
        out, _ = proc.communicate()
        text = out.decode(errors="replace")
        name = _submitted_name(text)
        if proc.returncode != 0 or name is None:
            result.failed(f"exit {proc.returncode}: {text.strip()[-300:]}")
        else:
            result.submitted(name)
    return result


def _submitted_name(text: str) -> str | None:
    """``trainops submit`` prints the job's name as its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1].removeprefix("Submitted ") if lines else None


def wait_for_end(url: str, token: str | None, names: list[str], timeout: float) -> dict[str, Any]:
    """Poll the server until every job has ended; returns name -> description."""
    from trainops.client import Client

    deadline = time.monotonic() + timeout
    ended: dict[str, Any] = {}
    with Client(url, token) as client:
        while len(ended) < len(names):
            if time.monotonic() > deadline:
                raise BenchError(f"{len(names) - len(ended)} jobs still running after {timeout} s")
            for name in names:
                if name not in ended:
                    described = client.describe(name)
                    if described["TrainingJobStatus"] in TERMINAL:
                        ended[name] = described
            time.sleep(0.2)
    return ended


def _end_time(description: dict[str, Any]) -> float:
    stamp = description.get("TrainingEndTime") or description.get("LastModifiedTime")
    return dt.datetime.fromisoformat(str(stamp)).timestamp()


def measure_round(
    submit: Callable[[int, dict[str, str]], Round], args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    from trainops._settings import Settings

    round_ = submit(args.jobs, env)
    os.environ.update(env)
    settings = Settings.load()
    ended = wait_for_end(env["TRAINOPS_SERVER"], _token(settings), round_.names, args.timeout)
    last_end = max((_end_time(d) for d in ended.values()), default=time.time())
    span = max(last_end - round_.start, 1e-6)
    not_completed = [n for n, d in ended.items() if d["TrainingJobStatus"] != "Completed"]
    return {
        "jobs": args.jobs,
        "span_s": span,
        "jobs_per_min": len(ended) / span * 60,
        "failed_submissions": round_.failed_submissions,
        "not_completed": not_completed,
        "failures": len(round_.failed_submissions) + len(not_completed),
    }


def measure_bare(jobs: int, slots: int) -> dict[str, Any]:
    """The hello script run ``jobs`` times, ``slots`` at a time, as plain processes."""
    env = {**clean_env(), "SM_CURRENT_HOST": "algo-1"}
    argv = [sys.executable, str(HELLO / "hello.py")]
    start = time.time()
    with ThreadPoolExecutor(max_workers=slots) as pool:
        codes = list(
            pool.map(lambda _: subprocess.run(argv, env=env, capture_output=True).returncode,
                     range(jobs))
        )  # fmt: skip
    span = time.time() - start
    return {"jobs": jobs, "span_s": span, "jobs_per_min": jobs / span * 60,
            "failures": sum(1 for c in codes if c != 0)}  # fmt: skip


def _token(settings: Any) -> str | None:
    """The token the CLI would send: the configured one, else the home's own."""
    from trainops._home import token_for

    return token_for(settings.server_url, settings.home, settings.token)


def server_slots(url: str, token: str | None) -> int:
    """How many hello jobs the server runs at a time (its capacity over the job's vCPUs)."""
    from trainops.catalog import get_instance_type
    from trainops.client import Client

    with Client(url, token) as client:
        info = client.info()
    cpus = int(info.get("capacity", {}).get("cpus") or os.cpu_count() or 1)
    need = get_instance_type("ml.m5.large").vcpus
    return max(1, cpus // need)


def summarise(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    summary = {}
    for path, results in rounds.items():
        rates = [r["jobs_per_min"] for r in results]
        summary[path] = {
            "median_jobs_per_min": statistics.median(rates),
            "failures": sum(r["failures"] for r in results),
        }
    bare = summary["bare"]["median_jobs_per_min"]
    for path in ("api", "cli"):
        if path in summary:
            summary[path]["share_of_bare"] = summary[path]["median_jobs_per_min"] / bare
            summary[path]["target_met"] = (
                summary[path]["median_jobs_per_min"] >= TARGET_JOBS_PER_MIN
                and summary[path]["failures"] == 0
            )
    return summary


def render_table(result: dict[str, Any]) -> str:
    labels = {
        "bare": "bare `python hello.py`, back to back (the limit)",
        "api": "trainops: threads calling `submit_job` in one process",
        "cli": "trainops: `trainops submit` processes started together",
    }
    rows = [
        "| path | jobs/min (median) | of the limit | failures | target |",
        "|---|---:|---:|---:|---|",
    ]
    for path, label in labels.items():
        s = result["summary"].get(path)
        if s is None:
            continue
        share = f"{s['share_of_bare']:.0%}" if "share_of_bare" in s else ""
        target = "" if path == "bare" else f"≥ {TARGET_JOBS_PER_MIN:.0f}, no failures"
        rows.append(
            f"| {label} | {s['median_jobs_per_min']:.0f} | {share} | {s['failures']} | {target} |"
        )
    m, v = result["machine"], result["versions"]
    rows += ["", (
        f"Measured {result['date']} on {m['cpu_model']}, {m['usable_cores']} usable cores; "
        f"Python {v['python']}, trainops {v['trainops']}; {result['jobs']} jobs per round, "
        f"{result['slots']} at a time, median of {result['rounds']} rounds per path, paths "
        "interleaved. Raw figures: [results/submit_rate.json](results/submit_rate.json)."
    )]  # fmt: skip
    return "\n".join(rows)


def update_readme(result: dict[str, Any], readme: Path) -> None:
    update_section(readme, "submit_rate", render_table(result))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_trainops()  # as an installed package is (see _processes.compile_trainops)
    workdir = Path(tempfile.mkdtemp(prefix="tob-rate-", dir="/tmp"))
    sweeper = ProcessSweeper()
    rounds: dict[str, list[dict[str, Any]]] = {"bare": [], "api": [], "cli": []}
    home = workdir / "home"
    try:
        with trainops_server(sweeper, home, workdir) as url:
            env = sweeper.env({**clean_env(), "TRAINOPS_HOME": str(home), "TRAINOPS_SERVER": url})
            os.environ.update(env)
            from trainops._settings import Settings

            slots = server_slots(url, _token(Settings.load()))
            for index in range(args.rounds):
                rounds["bare"].append(measure_bare(args.jobs, slots))
                for path, submit in (("api", submit_via_api), ("cli", submit_via_cli)):
                    figures = measure_round(submit, args, env)
                    rounds[path].append(figures)
                    print(f"round {index + 1} {path}: {figures['jobs_per_min']:.0f} jobs/min, "
                          f"{figures['failures']} failures", flush=True)  # fmt: skip
    except BenchError as exc:
        print(f"submit_rate: {exc}", file=sys.stderr)
        return 1
    finally:
        sweeper.stop_all()
    result = {
        "benchmark": "submit_rate",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "jobs": args.jobs,
        "rounds": args.rounds,
        "slots": slots,
        "machine": machine(),
        "versions": versions(),
        "target_jobs_per_min": TARGET_JOBS_PER_MIN,
        "rounds_raw": rounds,
        "summary": summarise(rounds),
    }
    write_json(result, args.out)
    update_readme(result, args.readme)
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
