"""Recovery from a lost or drained node on the Ray backend, against Ray Train's own restart.

Called by bench/spot_recovery.py (``measure_ray_recovery(rounds=..., workdir=...)``, whose
result it stores; ``table(result)`` renders it); ``python bench/_spot_ray.py [--rounds N]``
runs it alone and prints the table.

One local Ray cluster (a head with no CPUs and two worker nodes of 2 CPUs, on 127.0.0.1, as the
tests start it: tests/_support/ray_cluster.py) serves every path. Each round runs every path
once, the order rotating from round to round; a node taken away is replaced (``ray start``)
between runs, outside the timed window. What is timed: from the moment a node is taken away (the
kill; the return of ``ray drain-node``, whose RPC the GCS has answered by then) to the moment the
script is running again on another node (its first line, taken before its imports), and,
inside that, the script's own restore of its 1 MB checkpoint.

- trainops, node lost: a spot job of one ml.m5.large host on a ``trainops server --backend
  ray``; once its first checkpoint is synced, its node's raylet and processes are SIGKILLed.
- trainops, node drained: the same, but its node is drained for preemption (``ray drain-node
  --reason DRAIN_NODE_REASON_PREEMPTION --deadline-remaining-seconds 30``); the script stops on
  the notice (SIGTERM, default action), its checkpoint is synced, the job restarts elsewhere.
- Ray Train, node lost: ``TorchTrainer`` with one worker and ``FailureConfig(max_failures=3)``,
  reporting a 1 MB checkpoint every 0.5 s; once one is reported, its worker's node is killed.
  (Ray Train does not act on a drain: its worker runs until the node goes, so a drain costs it
  the whole deadline; only the lost node is compared.)
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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from _processes import (
    BenchError,
    ProcessSweeper,
    compile_trainops,
    free_port,
    http_ok,
    tool,
    wait_until,
)
from _report import machine, positive, update_section, versions, write_json
from launch_overhead import clean_env

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))  # the tests' cluster helper

from tests._support.ray_cluster import RayCluster, start_ray_cluster  # noqa: E402

__all__ = ["PATHS", "measure_ray_recovery", "table"]

PATHS = ("trainops_lost", "trainops_drained", "ray_train_lost")
DRAIN_DEADLINE_S = 30
_TIMEOUT_S = 240.0

# The job's script: the start time first, then the restore of its checkpoint; a second start
# ends at once (the round has what it measures), the first checkpoints every 0.5 s.
SCRIPT = """
import time
STARTED = time.time()
import json, os
folder = os.environ["SM_CHECKPOINT_DIR"]
began = time.perf_counter()
path = os.path.join(folder, "ckpt.bin")
restored = os.path.exists(path) and len(open(path, "rb").read()) == 1 << 20
line = {"t": STARTED, "restored": restored, "restore_s": time.perf_counter() - began}
again = os.path.exists(os.environ["BENCH_STARTS"])
with open(os.environ["BENCH_STARTS"], "a") as out:
    out.write(json.dumps(line) + "\\n")
while not again:
    with open(path + ".tmp", "wb") as out:
        out.write(os.urandom(1 << 20))
    os.replace(path + ".tmp", path)
    time.sleep(0.5)
"""

RAY_TRAIN = """
import json, os, tempfile, time
import ray
from ray.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

STARTS = os.environ["BENCH_STARTS"]  # the workers do not inherit the driver's environment

def loop():
    started = time.time()
    import ray.train
    checkpoint = ray.train.get_checkpoint()
    began = time.perf_counter()
    restored = False
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            restored = len(open(os.path.join(folder, "ckpt.bin"), "rb").read()) == 1 << 20
    line = {"t": started, "restored": restored, "restore_s": time.perf_counter() - began,
            "node": ray.get_runtime_context().get_node_id()}
    again = os.path.exists(STARTS)
    with open(STARTS, "a") as out:
        out.write(json.dumps(line) + "\\n")
    step = 0
    while not again:
        step += 1
        with tempfile.TemporaryDirectory() as folder:
            with open(os.path.join(folder, "ckpt.bin"), "wb") as out:
                out.write(os.urandom(1 << 20))
            ray.train.report({"step": step}, checkpoint=Checkpoint.from_directory(folder))
        with open(STARTS + ".reported", "w") as out:
            out.write(str(step))
        time.sleep(0.5)

ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR")
trainer = TorchTrainer(
    loop,
    scaling_config=ScalingConfig(num_workers=1, use_gpu=False),
    run_config=RunConfig(name=os.environ["BENCH_NAME"], storage_path=os.environ["BENCH_STORAGE"],
                         failure_config=FailureConfig(max_failures=3)),
)
result = trainer.fit()
if result.error is not None:
    raise result.error
"""


class RecoveryBench:
    """The cluster, the trainops server on it, and each path's samples."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.cluster: RayCluster = start_ray_cluster(workdir / "cluster", workers=2)
        self.sweeper = ProcessSweeper()
        self.samples: dict[str, list[dict[str, float]]] = {name: [] for name in PATHS}
        self.env = self._server()
        self.runs = 0

    def _server(self) -> dict[str, str]:
        home, port = self.workdir / "home", free_port()
        extra = {**self.cluster.client_env(), "TRAINOPS_SHARED_PATHS": str(self.workdir)}
        env = {**clean_env(), "TRAINOPS_HOME": str(home), **extra}
        argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port),
                "--backend", "ray", "--ray-address", self.cluster.address]  # fmt: skip
        log = self.workdir / "server.log"
        proc = self.sweeper.spawn(argv, env, log)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{url}/api/v1/health"), "trainops server", proc, log, 120)
        return {**clean_env(), "TRAINOPS_HOME": str(home), "TRAINOPS_SERVER": url}

    def close(self) -> None:
        self.sweeper.stop_all()
        self.cluster.stop()

    def run(self, path: str) -> dict[str, float]:
        self.runs += 1
        folder = self.workdir / f"run-{self.runs}-{path}"
        folder.mkdir()
        measure = self._ray_train if path == "ray_train_lost" else self._trainops
        sample = measure(folder, path)
        self.samples[path].append(sample)
        self.cluster.add_worker()  # the node taken away, replaced outside the timed window
        return sample

    # trainops --------------------------------------------------------------------------

    def _trainops(self, folder: Path, path: str) -> dict[str, float]:
        starts, name = folder / "starts.jsonl", f"spot-{self.runs}"
        spec = folder / "job.yaml"
        (folder / "src").mkdir()
        (folder / "src" / "recover.py").write_text(SCRIPT)
        spec.write_text(yaml.safe_dump(_spot_spec(name, folder, starts)))
        self._cli("submit", str(spec))
        _lines(starts, 1)
        _until(lambda: (folder / "checkpoints" / "ckpt.bin").exists(), "the first sync")
        worker = self._worker(self._node_of(name))
        if path == "trainops_drained":
            # From Ray's acceptance of the drain (the CLI's own start, ~2 s of imports, is not
            # the interruption's): its RPC returns within milliseconds of the GCS's record.
            self._drain(worker)
            taken = time.time()
        else:
            taken = time.time()
            self.cluster.kill_node(worker)
        again = _lines(starts, 2)[1]
        _until(lambda: self._status(name) == "Completed", f"the end of {name}")
        return _sample(taken, again)

    def _cli(self, *args: str) -> str:
        done = subprocess.run([*tool("trainops"), *args], env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip
        if done.returncode != 0:
            raise BenchError(f"trainops {' '.join(args)}: {done.stderr[-1000:]}")
        return done.stdout

    def _status(self, name: str) -> str:
        status = str(json.loads(self._cli("describe", name))["TrainingJobStatus"])
        if status in ("Failed", "Stopped"):
            raise BenchError(f"job {name} ended {status}")
        return status

    def _node_of(self, name: str) -> str:
        hosts = json.loads(self._cli("describe", name)).get("Hosts", [])
        return str(hosts[0]["Node"]).split("/")[1]

    def _drain(self, worker: str) -> None:
        ray = Path(sys.executable).parent / "ray"
        command = [str(ray), "drain-node", "--address", self.cluster.address, "--node-id",
                   self.cluster.node_ids()[worker], "--reason", "DRAIN_NODE_REASON_PREEMPTION",
                   "--reason-message", "bench", "--deadline-remaining-seconds",
                   str(DRAIN_DEADLINE_S)]  # fmt: skip
        subprocess.run(command, env=self.cluster.env, capture_output=True, check=True)

    # Ray Train -------------------------------------------------------------------------

    def _ray_train(self, folder: Path, path: str) -> dict[str, float]:
        starts, driver = folder / "starts.jsonl", folder / "driver.py"
        driver.write_text(RAY_TRAIN)
        env = {**clean_env(), **self.cluster.client_env(), "RAY_ADDRESS": self.cluster.address,
               "BENCH_STARTS": str(starts), "BENCH_NAME": f"recover-{self.runs}",
               "BENCH_STORAGE": str(folder / "storage")}  # fmt: skip
        proc = self.sweeper.spawn([sys.executable, str(driver)], env, folder / "driver.log")
        first = _lines(starts, 1)[0]
        reported = Path(str(starts) + ".reported")
        # Ray Train registers a reported checkpoint a moment after report() returns: a worker
        # killed right after its first report restarts without it. Two more reports first.
        wait_until(lambda: reported.exists() and int(reported.read_text() or 0) >= 3,
                   "three reported checkpoints", proc, folder / "driver.log", _TIMEOUT_S)  # fmt: skip
        worker = self._worker(str(first["node"]))
        taken = time.time()
        self.cluster.kill_node(worker)
        again = _lines(starts, 2)[1]
        if proc.wait(timeout=_TIMEOUT_S) != 0:
            raise BenchError(f"Ray Train's driver failed: see {folder / 'driver.log'}")
        return _sample(taken, again)

    def _worker(self, node: str) -> str:
        return next(w for w, n in self.cluster.node_ids().items() if n.startswith(node))


def _spot_spec(name: str, folder: Path, starts: Path) -> dict[str, Any]:
    return {
        "job_name": name,
        "entry_point": "recover.py",
        "source_dir": str(folder / "src"),
        "instance_type": "ml.m5.large",
        "use_spot_instances": True,
        "stopping_condition": {"max_runtime_in_seconds": 600, "max_wait_time_in_seconds": 1200},
        "checkpoint": {"uri": (folder / "checkpoints").as_uri()},
        "environment": {"BENCH_STARTS": str(starts)},
    }


def _lines(path: Path, count: int) -> list[dict[str, Any]]:
    """The first ``count`` start lines of ``path``, waiting for them."""
    found: list[dict[str, Any]] = []

    def enough() -> bool:
        nonlocal found
        text = path.read_text() if path.exists() else ""
        found = [json.loads(line) for line in text.splitlines() if line.endswith("}")]
        return len(found) >= count

    _until(enough, f"start {count} in {path}")
    return found


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: not there after {_TIMEOUT_S:.0f} s")
        time.sleep(0.05)


def _sample(taken: float, again: Mapping[str, Any]) -> dict[str, float]:
    """The round's figures; ``restored`` 0.0 where the second start found no checkpoint (the
    table says how many did)."""
    return {
        "recovery_s": float(again["t"]) - taken,
        "restore_s": float(again["restore_s"]),
        "restored": 1.0 if again.get("restored") else 0.0,
    }


def measure_ray_recovery(rounds: int, workdir: Path) -> dict[str, Any]:
    """``rounds`` interleaved rounds of every path on a cluster of its own, under ``workdir``."""
    bench = RecoveryBench(Path(tempfile.mkdtemp(prefix="sray-", dir=workdir)))
    try:
        for index in range(rounds):
            order = PATHS[index % len(PATHS) :] + PATHS[: index % len(PATHS)]
            for path in order:
                sample = bench.run(path)
                print(f"ray round {index + 1} {path}: {sample['recovery_s']:.2f} s", flush=True)
    finally:
        bench.close()
    medians = {
        path: statistics.median(s["recovery_s"] for s in samples)
        for path, samples in bench.samples.items()
    }
    return {
        "cluster": "head (0 CPUs) + 2 worker nodes of 2 CPUs, 127.0.0.1",
        "rounds": rounds,
        "drain_deadline_s": DRAIN_DEADLINE_S,
        "samples": bench.samples,
        "median_recovery_s": medians,
        "ratio_ray_train_to_trainops_lost": medians["ray_train_lost"] / medians["trainops_lost"],
    }


def table(result: Mapping[str, Any]) -> str:
    """A markdown table of ``measure_ray_recovery``'s result."""
    rows = ["| Ray backend: node taken away → script running again | median (s) | restore (s) "
            "| restarts that found the checkpoint |", "|---|---:|---:|---:|"]  # fmt: skip
    label: dict[str, Callable[[Any], str]] = {
        "trainops_lost": lambda r: "trainops spot job, node killed",
        "trainops_drained": lambda r: (
            f"trainops spot job, node drained ({r['drain_deadline_s']} s deadline)"
        ),
        "ray_train_lost": lambda r: (
            "Ray Train TorchTrainer, FailureConfig(max_failures=3), node killed"
        ),
    }
    for path in PATHS:
        samples = result["samples"][path]
        restore = statistics.median(s["restore_s"] for s in samples)
        found = sum(int(s["restored"]) for s in samples)
        rows.append(f"| {label[path](result)} | {result['median_recovery_s'][path]:.2f} | "
                    f"{restore:.3f} | {found} of {len(samples)} |")  # fmt: skip
    rows.append(f"| Ray Train / trainops, node killed | "
                f"{result['ratio_ray_train_to_trainops_lost']:.1f}x | | |")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=positive, default=3, help="interleaved rounds (3)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "spot_ray.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    compile_trainops()
    workdir = Path(tempfile.mkdtemp(prefix="sray-", dir="/tmp"))
    try:
        result = measure_ray_recovery(args.rounds, workdir)
    except BenchError as exc:
        print(f"_spot_ray: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    date = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    result = {"benchmark": "spot_ray", "date": date, "machine": machine(),
              "versions": versions(), **result}  # fmt: skip
    write_json(result, args.out)
    update_section(args.readme, "spot_ray", _with_footer(result))
    print(table(result))
    return 0


def _with_footer(result: Mapping[str, Any]) -> str:
    return (
        f"{table(result)}\n\nMeasured {result['date']} on {result['machine']['cpu_model']} "
        f"({result['machine']['usable_cores']} usable cores), ray {result['versions']['ray']}; "
        f"{result['cluster']}; medians of {result['rounds']} interleaved rounds. Raw samples: "
        "[results/spot_ray.json](results/spot_ray.json)."
    )


if __name__ == "__main__":
    sys.exit(main())
