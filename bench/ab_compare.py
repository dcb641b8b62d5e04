"""A/B: the working tree's trainops (B) against a git ref's (A), interleaved, in one run.

On a machine shared with other work the absolute figures drift from minute to minute; what
holds is the ratio of two variants measured side by side. Three measurements, each alternating
A and B (the order rotating from round to round):

- ``launch``: ``trainops run bench/hello/hello.yaml`` warm (against a ``trainops server`` of the
  same variant, started once) and cold (embedded server), beside the bare ``python hello.py``;
  overhead = median(path) - median(bare), as in ``launch_overhead.py``.
- ``namespace``: a host's namespaces made (the holder started and ready, as the agent does
  early) and the hello script run in them (joined by ``--join``, or started by the holder where
  the variant can: ``HostNamespace.run_held``), then closed; wall time and the CPU time of every
  process involved, per launch.
- ``idle``: one ``trainops server`` per variant, each with one job whose script sleeps; the CPU
  of the server process (not its agents) over the same windows, in % of a core.

    python bench/ab_compare.py [--baseline main] [--only launch,namespace,idle] [--rounds 10]

Results go to bench/results/ab_compare.json (raw samples, medians, B/A ratios). Everything
listens on 127.0.0.1; every process started is stopped at the end, also on errors.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
from _processes import BenchError, ProcessSweeper, free_port, http_ok, run_timed, tool, wait_until
from _report import machine, write_json

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
HELLO = BENCH / "hello"
EXPECT = "hello from algo-1"
SLEEPER = "import time\nprint('sleeping', flush=True)\ntime.sleep(3600)\n"
SLEEP_JOB = (
    "base_job_name: idle\nentry_point: sleep.py\nsource_dir: .\ninstance_type: ml.m5.large\n"
    "stopping_condition:\n  max_runtime_in_seconds: 3600\n"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main", help="git ref of A (default main)")
    parser.add_argument("--only", default="launch,namespace,idle", help="what to measure")
    parser.add_argument("--rounds", type=int, default=10, help="launch rounds (default 10)")
    parser.add_argument("--ns-rounds", type=int, default=6, help="namespace rounds (default 6)")
    parser.add_argument("--ns-per-round", type=int, default=5, help="launches a round")
    parser.add_argument("--idle-windows", type=int, default=8)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "ab_compare.json")
    parser.add_argument("--ns-driver", type=int, help=argparse.SUPPRESS)  # internal
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - {"launch", "namespace", "idle"}
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}; use launch, namespace, idle")
    return args


def baseline_tree(ref: str, into: Path) -> Path:
    """``src/`` of ``ref``, extracted under ``into``."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref, "src"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"git archive {ref}: {done.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(into, filter="data")
    return into / "src"


def variant_env(src: Path, home: Path) -> dict[str, str]:
    drop = ("TRAINOPS_", "AWS_", "RAY_", "SM_", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "PYTHONPATH": str(src), "TRAINOPS_HOME": str(home)}


@contextlib.contextmanager
def server(
    src: Path,
    home: Path,
    sweeper: ProcessSweeper,
    log: Path,
    extra_env: dict[str, str] | None = None,
) -> Iterator[str]:
    port = free_port()
    argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
    proc = sweeper.spawn(argv, {**variant_env(src, home), **(extra_env or {})}, log)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: http_ok(f"{url}/api/v1/health"), "trainops server", proc, log, 60)
    yield url


class _NoTree:
    """What a held start is given for the script's process tree, in either code measured: a
    tree without a cgroup (``cgroup``, ``adopt``: this code's ``ProcessTree``) and, for code
    from before it, the callback told the script's pid."""

    cgroup = None

    def adopt(self, pid: int) -> None:
        return None

    def __call__(self, pid: int) -> None:
        return None


def rotated(items: list[Any], index: int) -> list[Any]:
    shift = index % len(items)
    return items[shift:] + items[:shift]


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in samples.items()}


def measure_launch(variants: dict[str, Path], work: Path, rounds: int) -> dict[str, Any]:
    sweeper, runs = ProcessSweeper(), ProcessSweeper()
    bare_env = {**variant_env(Path(), work), "SM_CURRENT_HOST": "algo-1"}
    paths: list[tuple[str, list[str], dict[str, str], bool]] = [
        ("bare", [sys.executable, str(HELLO / "hello.py")], bare_env, False)
    ]
    run = [*tool("trainops"), "run", str(HELLO / "hello.yaml")]
    samples: dict[str, list[float]] = {}
    try:
        with contextlib.ExitStack() as stack:
            for name, src in variants.items():
                home = work / f"warm-{name}"
                url = stack.enter_context(server(src, home, sweeper, work / f"{name}.log"))
                warm = {**variant_env(src, home), "TRAINOPS_SERVER": url}
                paths.append((f"{name}_warm", run, warm, False))
                paths.append((f"{name}_cold", run, variant_env(src, work / f"cold-{name}"), True))
            for index in range(rounds + 1):  # round 0 warms up
                for name, argv, env, sweep in rotated(paths, index):
                    elapsed = run_timed(argv, env, runs, EXPECT, 300)
                    if sweep:
                        runs.stop_all()
                    if index:
                        samples.setdefault(name, []).append(elapsed)
                print(f"launch round {index}", flush=True)
    finally:
        runs.stop_all()
        sweeper.stop_all()
    found = medians(samples)
    overhead = {k: v - found["bare"] for k, v in found.items() if k != "bare"}
    ratios = {m: overhead[f"B_{m}"] / overhead[f"A_{m}"] for m in ("warm", "cold")}
    return {"samples": samples, "median_s": found, "overhead_s": overhead, "ratio_b_over_a": ratios}


def ns_driver(count: int) -> int:
    """(Run under a variant's PYTHONPATH.) ``count`` launches; their figures as JSON."""
    try:  # where the module lives now; before, trainops.agent._hostns
        from trainops.agent.supervision._hostns import (
            HostNamespace,
            hold_arguments,
            write_hosts_file,
        )
    except ImportError:
        from trainops.agent._hostns import (  # type: ignore[no-redef]
            HostNamespace,
            hold_arguments,
            write_hosts_file,
        )

    work = Path(tempfile.mkdtemp(prefix="ab-ns-"))
    hosts = write_hosts_file(work / "hosts", {"algo-1": "127.9.9.1"})
    arguments = hold_arguments("algo-1", hosts, [], [], [])
    env = {**os.environ, "SM_CURRENT_HOST": "algo-1"}
    argv = [sys.executable, str(HELLO / "hello.py")]
    found: dict[str, list[float]] = {"wall_ms": [], "ready_ms": [], "cpu_ms": []}
    for _ in range(count):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        namespace = HostNamespace.start(arguments)
        namespace.ready()
        ready = time.perf_counter()
        if hasattr(namespace, "run_held"):
            process = namespace.run_held(["algo-1"])(argv, work, env, _NoTree())
        else:
            joined = namespace.join(argv, ["algo-1"], None)
            process = subprocess.Popen(
                joined, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True,
            )  # fmt: skip
        out, err = process.communicate(timeout=60)
        end = time.perf_counter()
        namespace.close()
        if process.returncode != 0 or EXPECT.encode() not in out:
            raise BenchError(f"the script failed ({process.returncode}): {err.decode()[-500:]}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        found["wall_ms"].append((end - start) * 1000)
        found["ready_ms"].append((ready - start) * 1000)
        found["cpu_ms"].append(cpu * 1000)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(found))
    return 0


def measure_namespace(variants: dict[str, Path], rounds: int, per_round: int) -> dict[str, Any]:
    samples: dict[str, dict[str, list[float]]] = {n: {} for n in variants}
    for index in range(rounds):
        for name, src in rotated(list(variants.items()), index):
            env = variant_env(src, Path(tempfile.gettempdir()))
            command = [sys.executable, __file__, "--ns-driver", str(per_round)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise BenchError(f"namespace driver {name}: {done.stderr[-2000:]}")
            for key, values in json.loads(done.stdout).items():
                samples[name].setdefault(key, []).extend(values)
        print(f"namespace round {index + 1}", flush=True)
    found = {name: medians(values) for name, values in samples.items()}
    ratios = {key: found["B"][key] / found["A"][key] for key in found["A"]}
    return {"samples": samples, "median": found, "ratio_b_over_a": ratios}


def measure_idle(
    variants: dict[str, Path], work: Path, windows: int, seconds: float
) -> dict[str, Any]:
    job = work / "sleeper"
    job.mkdir()
    (job / "sleep.py").write_text(SLEEPER)
    (job / "sleep.yaml").write_text(SLEEP_JOB)
    sweeper = ProcessSweeper()
    servers: dict[str, psutil.Process] = {}
    samples: dict[str, list[float]] = {name: [] for name in variants}
    try:
        with contextlib.ExitStack() as stack:
            for name, src in variants.items():
                home = work / f"idle-{name}"
                url = stack.enter_context(server(src, home, sweeper, work / f"idle-{name}.log"))
                env = {**variant_env(src, home), "TRAINOPS_SERVER": url}
                submit = [*tool("trainops"), "submit", str(job / "sleep.yaml")]
                subprocess.run(submit, env=env, capture_output=True, check=True, timeout=120)
                servers[name] = psutil.Process(sweeper.roots[-1])  # the server just started
            time.sleep(8)  # the jobs start
            for index in range(windows):
                before = {n: sum(p.cpu_times()[:2]) for n, p in servers.items()}
                start = time.monotonic()
                time.sleep(seconds)
                elapsed = time.monotonic() - start
                for name, process in servers.items():
                    used = sum(process.cpu_times()[:2]) - before[name]
                    samples[name].append(100 * used / elapsed)
                print(f"idle window {index + 1}", flush=True)
    finally:
        sweeper.stop_all()
    found = medians(samples)
    return {"samples_pct": samples, "median_pct": found, "ratio_b_over_a": found["B"] / found["A"]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ns_driver is not None:
        return ns_driver(args.ns_driver)
    work = Path(tempfile.mkdtemp(prefix="ab-", dir="/tmp"))
    result: dict[str, Any] = {"machine": machine(), "baseline": args.baseline}
    result["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result["load_average_at_start"] = os.getloadavg()
    try:
        variants = {"A": baseline_tree(args.baseline, work / "a"), "B": REPO / "src"}
        for src in variants.values():
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)
        only = args.only.split(",")
        if "namespace" in only:
            result["namespace"] = measure_namespace(variants, args.ns_rounds, args.ns_per_round)
        if "launch" in only:
            result["launch"] = measure_launch(variants, work, args.rounds)
        if "idle" in only:
            result["idle"] = measure_idle(variants, work, args.idle_windows, args.idle_seconds)
    except BenchError as exc:
        print(f"ab_compare: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["load_average_at_end"] = os.getloadavg()
    write_json(result, args.out)
    for part in ("namespace", "launch", "idle"):
        if part in result:
            print(part, json.dumps(result[part]["ratio_b_over_a"]))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
