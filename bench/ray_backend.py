"""trainops on a Ray cluster, next to trainops on the local backend and Ray Train on the same cluster.

One local Ray cluster (a head with no CPUs and two worker nodes of 2 CPUs, all on 127.0.0.1,
started as by the tests: tests/_support/ray_cluster.py) serves every Ray path. Two parts, each
interleaved (one warm-up round, then ``--runs`` rounds running every path once, in an order that
rotates from round to round):

(a) launch overhead of the hello job (bench/hello), each a fresh process, median(path) -
    median(bare):
    - bare:           ``python hello.py``
    - trainops local: ``trainops run hello.yaml`` against a ``trainops server`` (local backend)
    - trainops ray:   the same against a ``trainops server --backend ray`` on the cluster
    - ray train:      ``ray_train_hello.py`` (TorchTrainer, one worker) joining the cluster
(b) time to a process group: from the start of the command to the moment the last of four
    ranks has returned from ``init_process_group`` (each rank writes its time to a file):
    - trainops ray:   a job of 2 hosts x 2 processes (``trainops run``), one host per node
    - ray train:      ``TorchTrainer`` with 4 workers (its train loop starts after its
                      ``init_process_group``)

Results go to bench/results/ray_backend.json and the table in bench/README.md.

    python bench/ray_backend.py [--runs 5] [--group-runs 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from _processes import (
    BenchError,
    ProcessSweeper,
    compile_trainops,
    free_port,
    http_ok,
    run_timed,
    tool,
    wait_until,
)
from _report import machine, update_section, versions, write_json
from launch_overhead import clean_env

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
HELLO = BENCH / "hello"
EXPECT = "hello from algo-1"
sys.path.insert(0, str(ROOT))  # the tests' cluster helper

from tests._support.ray_cluster import RayCluster, start_ray_cluster  # noqa: E402

TARGET_WARM_S = 2.0
TARGET_RATIO = 3.0

GROUP_SCRIPT = """
import os, time, torch.distributed as dist
dist.init_process_group("gloo")
with open(os.path.join(os.environ["BENCH_TIMES"], f"rank-{dist.get_rank()}"), "w") as out:
    out.write(repr(time.time()))
dist.barrier()
dist.destroy_process_group()
"""

RAY_GROUP = """
import os, sys, tempfile, time
import ray
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

TIMES = os.environ["BENCH_TIMES"]  # the workers do not inherit the driver's environment

def loop():
    import torch.distributed as dist
    rank = dist.get_rank()  # TorchTrainer calls init_process_group before the loop
    with open(os.path.join(TIMES, f"rank-{rank}"), "w") as out:
        out.write(repr(time.time()))
    dist.barrier()

ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR")
storage = tempfile.mkdtemp(prefix="ray-group-")
trainer = TorchTrainer(
    loop,
    scaling_config=ScalingConfig(num_workers=4, use_gpu=False),
    run_config=RunConfig(name="group", storage_path=storage),
)
result = trainer.fit()
if result.error is not None:
    raise result.error
print("group done", flush=True)
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of part (a) (default 5)")
    parser.add_argument("--group-runs", type=int, default=3, help="rounds of part (b)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per run")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "ray_backend.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    return parser.parse_args(argv)


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path, cluster: RayCluster) -> None:
        self.args, self.workdir, self.cluster = args, workdir, cluster
        self.sweeper = ProcessSweeper()
        self.servers = ProcessSweeper()
        self.launch: dict[str, list[float]] = {}
        self.group: dict[str, list[float]] = {}

    def server(self, name: str, extra: Mapping[str, str], args: list[str]) -> dict[str, str]:
        """A warm ``trainops server``; returns the environment of commands that use it."""
        home = self.workdir / f"home-{name}"
        port = free_port()
        env = {**clean_env(), "TRAINOPS_HOME": str(home), **extra}
        argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port), *args]
        log = self.workdir / f"server-{name}.log"
        proc = self.servers.spawn(argv, env, log)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{url}/api/v1/health"), f"{name} server", proc, log, 120)
        return {**clean_env(), "TRAINOPS_HOME": str(home), "TRAINOPS_SERVER": url}

    def run_launch(self) -> None:
        ray = {**self.cluster.client_env(), "TRAINOPS_SHARED_PATHS": str(self.workdir)}
        local_env = self.server("local", {}, [])
        ray_env = self.server(
            "ray", ray, ["--backend", "ray", "--ray-address", self.cluster.address]
        )
        run = [*tool("trainops"), "run", str(HELLO / "hello.yaml")]
        driver = [sys.executable, str(HELLO / "ray_train_hello.py")]
        paths = [
            ("bare", [sys.executable, str(HELLO / "hello.py")],
             {**clean_env(), "SM_CURRENT_HOST": "algo-1"}),
            ("trainops_local", run, local_env),
            ("trainops_ray", run, ray_env),
            ("ray_train", driver,
             {**clean_env(), **self.cluster.client_env(), "RAY_ADDRESS": self.cluster.address}),
        ]  # fmt: skip
        self.ray_job_env = ray_env
        for index in range(self.args.runs + 1):
            order = paths[index % len(paths) :] + paths[: index % len(paths)]
            print(f"launch {'warm-up' if index == 0 else index:<8}", end="", flush=True)
            for name, argv, env in order:
                elapsed = run_timed(argv, env, self.sweeper, EXPECT, self.args.timeout)
                if index > 0:
                    self.launch.setdefault(name, []).append(elapsed)
                print(f" {name}={elapsed:.2f}", end="", flush=True)
            print(flush=True)

    def run_group(self) -> None:
        job = self.workdir / "group-job"
        (job / "src").mkdir(parents=True)
        (job / "src" / "group.py").write_text(GROUP_SCRIPT)
        driver = self.workdir / "ray_group.py"
        driver.write_text(RAY_GROUP)
        for index in range(self.args.group_runs + 1):
            order = ["trainops_ray", "ray_train"] if index % 2 else ["ray_train", "trainops_ray"]
            print(f"group {'warm-up' if index == 0 else index:<9}", end="", flush=True)
            for name in order:
                times = self.workdir / f"times-{name}-{index}"
                times.mkdir()
                if name == "trainops_ray":
                    spec = job / f"job-{index}.yaml"
                    spec.write_text(yaml.safe_dump(_group_spec(job, times, index)))
                    argv = [*tool("trainops"), "run", str(spec)]
                    env = self.ray_job_env
                else:
                    argv = [sys.executable, str(driver)]
                    env = {**clean_env(), **self.cluster.client_env(), "BENCH_TIMES": str(times),
                           "RAY_ADDRESS": self.cluster.address}  # fmt: skip
                elapsed = _to_group(argv, env, times, self.args.timeout)
                if index > 0:
                    self.group.setdefault(name, []).append(elapsed)
                print(f" {name}={elapsed:.2f}", end="", flush=True)
            print(flush=True)


def _group_spec(job: Path, times: Path, index: int) -> dict[str, Any]:
    return {
        "job_name": f"group-{index}-{int(time.time())}",
        "entry_point": "group.py",
        "source_dir": str(job / "src"),
        "instance_type": "ml.m5.large",
        "instance_count": 2,
        "distribution": {"processes_per_host": 2},
        "environment": {"BENCH_TIMES": str(times)},
    }


def _to_group(argv: list[str], env: Mapping[str, str], times: Path, timeout: float) -> float:
    """Seconds from the start of ``argv`` to the last rank's return from init_process_group."""
    start = time.time()
    done = subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout[-2000:]}"
                         f"\n{done.stderr[-2000:]}")  # fmt: skip
    stamps = [float(path.read_text()) for path in times.iterdir()]
    if len(stamps) != 4:
        raise BenchError(f"{' '.join(argv)}: {len(stamps)} of 4 ranks reported")
    return max(stamps) - start


def build(bench: Bench) -> dict[str, Any]:
    med = {name: statistics.median(v) for name, v in bench.launch.items()}
    overhead = {name: med[name] - med["bare"] for name in med if name != "bare"}
    group = {name: statistics.median(v) for name, v in bench.group.items()}
    ratio_launch = overhead["ray_train"] / overhead["trainops_ray"]
    ratio_group = group["ray_train"] / group["trainops_ray"]
    return {
        "benchmark": "ray_backend",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "machine": machine(),
        "versions": versions(),
        "cluster": "head (0 CPUs) + 2 worker nodes of 2 CPUs, 127.0.0.1",
        "runs": bench.args.runs,
        "group_runs": bench.args.group_runs,
        "launch_samples": bench.launch,
        "group_samples": bench.group,
        "launch_medians": med,
        "launch_overheads": overhead,
        "group_medians": group,
        "ratio_launch": ratio_launch,
        "ratio_group": ratio_group,
        "targets": {"trainops_ray_warm_overhead_s": TARGET_WARM_S, "ratio": TARGET_RATIO},
        "targets_met": {
            "warm_overhead": overhead["trainops_ray"] <= TARGET_WARM_S,
            "ratio_launch": ratio_launch >= TARGET_RATIO,
        },
    }


def table(result: dict[str, Any]) -> str:
    med, over, group = result["launch_medians"], result["launch_overheads"], result["group_medians"]
    rows = [
        "| path | median (s) | overhead vs bare (s) | target |",
        "|---|---:|---:|---|",
        f"| bare `python hello.py` | {med['bare']:.3f} | | |",
        f"| `trainops run`, local backend (server running) | {med['trainops_local']:.3f} | "
        f"{over['trainops_local']:.3f} | |",
        f"| `trainops run`, Ray backend (server running) | {med['trainops_ray']:.3f} | "
        f"{over['trainops_ray']:.3f} | ≤ {TARGET_WARM_S:g} s |",
        f"| Ray Train `TorchTrainer`, 1 worker, same cluster | {med['ray_train']:.3f} | "
        f"{over['ray_train']:.3f} | |",
        f"| Ray Train overhead / trainops-on-Ray overhead | {result['ratio_launch']:.1f}x | | "
        f"≥ {TARGET_RATIO:g}x |",
        "",
        "| to a process group of 4 ranks (start of the command → last rank out of "
        "`init_process_group`) | median (s) |",
        "|---|---:|",
        f"| trainops on Ray: 2 hosts x 2 processes, a node each | {group['trainops_ray']:.3f} |",
        f"| Ray Train `TorchTrainer`, 4 workers | {group['ray_train']:.3f} |",
        f"| Ray Train / trainops | {result['ratio_group']:.1f}x |",
        "",
        f"Measured {result['date']} on {result['machine']['cpu_model']} "
        f"({result['machine']['usable_cores']} usable cores), Python "
        f"{result['versions']['python']}, ray {result['versions']['ray']}; {result['cluster']}; "
        f"medians of {result['runs']} (launch) and {result['group_runs']} (process group) "
        "interleaved rounds after a warm-up round. Raw samples: "
        "[results/ray_backend.json](results/ray_backend.json).",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_trainops()
    workdir = Path(tempfile.mkdtemp(prefix="trb-", dir="/tmp"))
    cluster = start_ray_cluster(workdir / "cluster", workers=2)
    bench = Bench(args, workdir, cluster)
    try:
        bench.run_launch()
        bench.run_group()
    except BenchError as exc:
        print(f"\nray_backend: {exc}", file=sys.stderr)
        return 1
    finally:
        bench.sweeper.stop_all()
        bench.servers.stop_all()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    result = build(bench)
    write_json(result, args.out)
    update_section(args.readme, "ray_backend", table(result))
    print(json.dumps({k: result[k] for k in ("launch_overheads", "group_medians")}, indent=1))
    print(f"wrote {args.out} and the table in {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
