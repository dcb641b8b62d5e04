"""The scheduler at scale: an idle server's CPU and a job's submit-to-start latency with 0, 1,000
and 10,000 jobs queued.

Tuning jobs and studies queue thousands of trials; the control plane must not pay for each of
them on every tick, and a job that can start must start as quickly behind 10,000 waiting jobs as
behind none. One ``trainops server`` per configuration is started on a loopback port, each with
its own home and the same local capacity (``TRAINOPS_LOCAL_CPUS=4``), and all of them stay up
for the whole run:

- a *holder* job (``ml.m5.large``: 2 CPUs) sleeps until the end, so 2 CPUs are free;
- ``queued`` jobs ask for ``ml.m5.xlarge`` (4 CPUs): none can start while the holder runs, and
  every one of them is Pending (with its message) before anything is measured;
- a *probe* job (``ml.m5.large``, prints a line) fits the 2 free CPUs: it is the newest job of
  its server, behind every queued one in submission order, so the scheduler must reach it past
  them (first fit) and the monitor's work on the queue, if any, competes with it.

Idle CPU: the servers' own processes (their agents are other processes), over the same window
for every configuration, as percent of one core (and CPU seconds per minute); a fourth server
that runs no job at all gives the floor (what an idle server costs with nothing to do). The
holder's agent reports every 0.5 s, so the configurations also pay for one running job. Latency: the probe
is submitted to each server in turn, in an order that rotates from round to round, and waited on
until it has ended; submit-to-start is from just before the submission request to the job's
``TrainingStartTime`` (the same machine's clock), and the submission request's own time is kept
too. Targets: idle CPU under 1 % of a core, and the median latency at 10,000 queued within 1.5x
of the empty queue's.

    python bench/scheduler_scale.py [--queued 0,1000,10000] [--rounds 40] [--idle-seconds 30]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import signal
import statistics
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from _processes import BenchError, ProcessSweeper, free_port, http_ok, tool, wait_until
from _report import machine, update_section, versions, write_json

BENCH = Path(__file__).resolve().parent
TARGET_IDLE_PCT = 1.0
TARGET_LATENCY_RATIO = 1.5
CPUS = 4
HOLD = "import time\nprint('holding', flush=True)\ntime.sleep(3600)\n"
HELLO = "print('hello from the probe')\n"
FLOOR = -1  # the size of the server that runs nothing: an idle server's own cost


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--queued", default="0,1000,10000", help="queue sizes (default 0,1000,10000)"
    )
    parser.add_argument(
        "--rounds", type=int, default=40, help="probes per configuration (default 40)"
    )
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="idle window (default 30)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "scheduler_scale.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.queued.split(",")]
    if args.rounds < 1 or args.idle_seconds <= 0 or any(size < 0 for size in args.sizes):
        parser.error("--rounds must be >= 1, --idle-seconds > 0, queue sizes >= 0")
    return args


def clean_env() -> dict[str, str]:
    drop = ("TRAINOPS_", "AWS_", "RAY_", "SM_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def source_archive(folder: Path, name: str, script: str) -> str:
    """A ``sourcedir.tar.gz`` holding ``script`` as ``train.py``; returns its file:// URI."""
    path = folder / f"{name}.tar.gz"
    data = script.encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path.as_uri()


@dataclass
class Config:
    """One server, its queue, and what was measured on it."""

    queued: int
    home: Path
    url: str = ""
    client: httpx.Client | None = None
    pid: int = 0
    fill_seconds: float = 0.0
    latency_s: list[float] = field(default_factory=list)
    submit_request_s: list[float] = field(default_factory=list)
    idle_cpu_pct: list[float] = field(default_factory=list)

    def api(self) -> httpx.Client:
        if self.client is None:
            token = (self.home / "token").read_text().strip()
            headers = {"Authorization": f"Bearer {token}"}
            self.client = httpx.Client(base_url=self.url, headers=headers, timeout=120)
        return self.client

    def submit(self, name: str, code: str, instance_type: str) -> None:
        spec = {"entry_point": "train.py", "instance_type": instance_type}
        body = {"job_name": name, "spec": spec, "code_uri": code}
        response = self.api().post("/api/v1/jobs", json=body)
        if response.status_code != 201:
            raise BenchError(f"submitting {name}: {response.status_code} {response.text[:300]}")

    def job(self, name: str) -> dict[str, Any]:
        response = self.api().get(f"/api/v1/jobs/{name}")
        if response.status_code != 200:
            raise BenchError(f"describing {name}: {response.status_code} {response.text[:300]}")
        data: dict[str, Any] = response.json()
        return data


def wait_job(config: Config, name: str, done: Any, what: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = config.job(name)
        if done(job):
            return job
        time.sleep(0.02)
    raise BenchError(f"{name} on the server with {config.queued} queued: not {what} in {timeout} s")


def start_servers(sweeper: ProcessSweeper, sizes: list[int], workdir: Path) -> list[Config]:
    """One server per size; the last one (size -1) runs no job at all: the floor."""
    configs = []
    for size in [*sizes, FLOOR]:
        home = workdir / f"home-{size}"
        port = free_port()
        env = {**clean_env(), "TRAINOPS_HOME": str(home), "TRAINOPS_LOCAL_CPUS": str(CPUS)}
        argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
        log = workdir / f"server-{size}.log"
        proc = sweeper.spawn(argv, env, log)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda u=url: http_ok(f"{u}/api/v1/health"), "trainops server", proc, log, 60)
        configs.append(Config(queued=size, home=home, url=url, pid=proc.pid))
    return configs


def fill(config: Config, hold: str, hello: str) -> None:
    """Start the holder, queue ``config.queued`` jobs, wait until the last one is Pending."""
    config.submit("holder", hold, "ml.m5.large")
    wait_job(config, "holder", lambda j: j["SecondaryStatus"] == "Training", "Training")
    started = time.monotonic()
    names = [f"queued-{i:05d}" for i in range(config.queued)]
    lock = threading.Lock()
    clients: dict[int, Config] = {}

    def one(name: str) -> None:
        ident = threading.get_ident()
        with lock:
            own = clients.setdefault(ident, Config(config.queued, config.home, config.url))
        own.submit(name, hello, "ml.m5.xlarge")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, names))
    for own in clients.values():
        if own.client is not None:
            own.client.close()
    config.fill_seconds = time.monotonic() - started
    if names:
        wait_job(config, names[-1], lambda j: j["SecondaryStatus"] == "Pending", "Pending")


def measure_idle(configs: list[Config], seconds: float) -> None:
    """CPU of every server's own process over the same window."""
    procs = {c.queued: psutil.Process(c.pid) for c in configs}
    before = {size: _cpu(proc) for size, proc in procs.items()}
    started = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - started
    for config in configs:
        used = _cpu(procs[config.queued]) - before[config.queued]
        config.idle_cpu_pct.append(100.0 * used / wall)


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def probe(config: Config, hello: str, index: int) -> None:
    name = f"probe-{index:03d}"
    sent = time.time()
    request_started = time.perf_counter()
    config.submit(name, hello, "ml.m5.large")
    config.submit_request_s.append(time.perf_counter() - request_started)
    ended = wait_job(
        config, name, lambda j: j["TrainingJobStatus"] != "InProgress", "ended", timeout=120
    )
    if ended["TrainingJobStatus"] != "Completed":
        raise BenchError(f"{name}: {ended['TrainingJobStatus']} {ended.get('FailureReason')}")
    start = dt.datetime.fromisoformat(ended["TrainingStartTime"]).timestamp()
    config.latency_s.append(start - sent)


def run(args: argparse.Namespace) -> dict[str, Any]:
    sweeper = ProcessSweeper()
    with tempfile.TemporaryDirectory(prefix="trainops-scheduler-scale-") as tmp:
        workdir = Path(tmp)
        hold = source_archive(workdir, "hold", HOLD)
        hello = source_archive(workdir, "hello", HELLO)
        try:
            configs = start_servers(sweeper, args.sizes, workdir)
            probed = configs[:-1]
            for config in probed:
                fill(config, hold, hello)
            measure_idle(configs, args.idle_seconds)
            for index in range(args.rounds):
                shift = index % len(probed)
                for config in probed[shift:] + probed[:shift]:
                    probe(config, hello, index)
            measure_idle(configs, args.idle_seconds)  # and again, after the probes
        finally:
            for config in locals().get("configs", []):
                if config.client is not None:
                    config.client.close()
            sweeper.stop_all()
    return build_result(args, configs)


def build_result(args: argparse.Namespace, configs: list[Config]) -> dict[str, Any]:
    floor = configs[-1]
    rows = {}
    for config in configs[:-1]:
        rows[str(config.queued)] = {
            "idle_cpu_pct_samples": config.idle_cpu_pct,
            "idle_cpu_pct": max(config.idle_cpu_pct),
            "idle_cpu_s_per_min": max(config.idle_cpu_pct) * 60 / 100,
            "latency_s_samples": config.latency_s,
            "latency_s_median": statistics.median(config.latency_s),
            "submit_request_s_median": statistics.median(config.submit_request_s),
            "fill_seconds": config.fill_seconds,
            "fill_jobs_per_s": config.queued / config.fill_seconds if config.fill_seconds else None,
        }
    empty = rows.get("0", {}).get("latency_s_median")
    for row in rows.values():
        row["latency_ratio"] = row["latency_s_median"] / empty if empty else None
    largest = rows[str(max(args.sizes))]
    return {
        "benchmark": "scheduler_scale",
        "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
        "settings": {
            "queued": args.sizes,
            "rounds": args.rounds,
            "idle_seconds": args.idle_seconds,
            "local_cpus": CPUS,
        },
        "configs": rows,
        "floor": {
            "idle_cpu_pct_samples": floor.idle_cpu_pct,
            "idle_cpu_pct": max(floor.idle_cpu_pct),
        },
        "targets": {
            "idle_cpu_pct_below": TARGET_IDLE_PCT,
            "latency_ratio_at_most": TARGET_LATENCY_RATIO,
            "idle_met": all(r["idle_cpu_pct"] < TARGET_IDLE_PCT for r in rows.values()),
            "latency_met": (largest["latency_ratio"] or 0) <= TARGET_LATENCY_RATIO,
        },
    }


def render_table(result: dict[str, Any]) -> str:
    lines = [
        "| jobs queued | idle server CPU (% of a core) | CPU s per min | submit-to-start (median) "
        "| vs empty queue | submit request (median) | queue filled at |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, row in result["configs"].items():
        ratio = f"{row['latency_ratio']:.2f}x" if row["latency_ratio"] is not None else ""
        rate = f"{row['fill_jobs_per_s']:.0f} jobs/s" if row["fill_jobs_per_s"] else ""
        lines.append(
            f"| {int(size):,} | {row['idle_cpu_pct']:.2f} | {row['idle_cpu_s_per_min']:.2f} "
            f"| {row['latency_s_median'] * 1000:.0f} ms | {ratio} "
            f"| {row['submit_request_s_median'] * 1000:.1f} ms | {rate} |"
        )
    floor = result["floor"]["idle_cpu_pct"]
    lines.append(f"| no job at all (the floor) | {floor:.2f} | {floor * 0.6:.2f} | | | | |")
    m, v, s = result["machine"], result["versions"], result["settings"]
    targets = result["targets"]
    met = "met" if targets["idle_met"] and targets["latency_met"] else "NOT met"
    lines += [
        "",
        f"Measured {result['measured_at']} on {m['cpu_model']}, {m['usable_cores']} usable cores; "
        f"Python {v['python']}, trainops {v['trainops']}; idle CPU over {s['idle_seconds']:.0f} s "
        f"windows (the higher of the two: before and after the probes), {s['rounds']} probes per "
        f"configuration, configurations interleaved. Targets (idle < {TARGET_IDLE_PCT} % of a "
        f"core, latency at {max(s['queued']):,} within {TARGET_LATENCY_RATIO}x): {met}. "
        "Raw figures: [results/scheduler_scale.json](results/scheduler_scale.json).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A SIGTERM ends the run through its clean-up: the servers and agents are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = run(args)
    write_json(result, args.out)
    update_section(args.readme, "scheduler_scale", render_table(result))
    print(json.dumps(result["configs"], indent=2))
    print(render_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
