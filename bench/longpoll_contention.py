"""Log long-polls against everything else: is a short job as quick with 300 followers waiting?

300 ``logs?wait=30`` long-polls once took every thread of the server's pool: ``/health`` took
28 s and agents' reports queued behind the readers, so a 15 s job was billed 32 s. This measures
two paths on one ``trainops server`` (real agents, loopback), interleaved round by round:

- idle:   nothing else waits on the server;
- polled: ``--polls`` long-polls wait on another job's log (none can answer before it stops).

In each, it times ``GET /api/v1/health`` (median of 10) and a short job (``sleep 1``) from
submission to Completed, and reads the job's BillableTimeInSeconds. Figures are the ratios
polled / idle. Results go to bench/results/longpoll_contention.json.

    python bench/longpoll_contention.py [--rounds 3] [--polls 300]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _processes import BenchError, ProcessSweeper, free_port, http_ok, tool, wait_until
from launch_overhead import clean_env

from trainops import JobSpec
from trainops._home import home_token
from trainops._settings import Settings
from trainops.client import Client, submit_job

BENCH = Path(__file__).resolve().parent
LIMITS = {"health_ratio": 5.0, "job_ratio": 1.5}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="idle/polled pairs (default 3)")
    parser.add_argument("--polls", type=int, default=300, help="waiting long-polls (default 300)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "longpoll_contention.json")
    return parser.parse_args(argv)


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.sweeper = ProcessSweeper()
        self.settings = Settings(home=workdir / "home")
        self.samples: dict[str, list[dict[str, float]]] = {"idle": [], "polled": []}
        (workdir / "job").mkdir()
        (workdir / "job" / "short.py").write_text("import time\ntime.sleep(1)\n")
        (workdir / "job" / "long.py").write_text("import time\ntime.sleep(600)\n")

    @contextmanager
    def server(self) -> Iterator[Client]:
        port = free_port()
        argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
        env = {**clean_env(), "TRAINOPS_HOME": str(self.settings.home), "TRAINOPS_LOCAL_CPUS": "8"}
        log = self.workdir / "server.log"
        proc = self.sweeper.spawn(argv, env, log)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until(lambda: http_ok(f"{url}/api/v1/health"), "trainops server", proc, log, 60)
            with Client(url, home_token(self.settings.home)) as client:
                yield client
        finally:
            self.sweeper.stop_all()

    def submit(self, client: Client, script: str) -> str:
        spec = JobSpec(entry_point=script, base_job_name=script.split(".")[0])
        return submit_job(
            client, spec, self.settings, base_dir=self.workdir / "job", progress=False
        )

    def wait(self, client: Client, name: str, statuses: set[str]) -> dict[str, Any]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = client.describe(name)
            if job["SecondaryStatus"] in statuses or job["TrainingJobStatus"] in statuses:
                return job
            time.sleep(0.05)
        raise BenchError(f"{name} did not reach {statuses}")

    def sample(self, client: Client) -> dict[str, float]:
        health = []
        for _ in range(10):
            started = time.perf_counter()
            client.health()
            health.append(time.perf_counter() - started)
        started = time.perf_counter()
        name = self.submit(client, "short.py")
        job = self.wait(client, name, {"Completed", "Failed", "Stopped"})
        if job["TrainingJobStatus"] != "Completed":
            raise BenchError(f"{name} ended {job['TrainingJobStatus']}: {job['FailureReason']}")
        return {
            "health_s": statistics.median(health),
            "job_s": time.perf_counter() - started,
            "billable_s": float(job["BillableTimeInSeconds"]),
        }

    def polled_sample(self, client: Client) -> dict[str, float]:
        anchor = self.submit(client, "long.py")
        self.wait(client, anchor, {"Training"})
        polls = Polls(client.url, home_token(self.settings.home) or "", anchor, self.args.polls)
        polls.start()
        try:
            return self.sample(client)
        finally:
            client.stop(anchor)
            answered = polls.join()
            self.wait(client, anchor, {"Stopped"})
            if answered != self.args.polls:
                raise BenchError(f"only {answered} of {self.args.polls} polls were answered")

    def run(self) -> None:
        with self.server() as client:
            self.sample(client)  # warm-up
            for index in range(self.args.rounds):
                for path in ("idle", "polled"):
                    taken = self.sample(client) if path == "idle" else self.polled_sample(client)
                    self.samples[path].append(taken)
                    print(f"round {index + 1} {path:<6} " + _fmt(taken), flush=True)


class Polls:
    """``count`` long-polls on one job's log, each on its own connection and thread."""

    def __init__(self, url: str, token: str, job: str, count: int) -> None:
        self.url, self.token, self.job, self.count = url, token, job, count
        self.answers: list[int] = []
        self.opened = threading.Semaphore(0)
        self.threads = [threading.Thread(target=self._poll, daemon=True) for _ in range(count)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()
        for _ in range(self.count):
            if not self.opened.acquire(timeout=60):
                raise BenchError("the long-polls could not connect")
        time.sleep(1.0)  # let every request reach the server and start waiting

    def _poll(self) -> None:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=90)
        try:
            conn.connect()
            self.opened.release()
            path = f"/api/v1/jobs/{self.job}/logs?after=100000000&wait=30"
            conn.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
            reply = conn.getresponse()
            reply.read()
            self.answers.append(reply.status)
        finally:
            conn.close()

    def join(self) -> int:
        for thread in self.threads:
            thread.join(timeout=60)
        return sum(1 for status in self.answers if status == 200)


def _fmt(sample: dict[str, float]) -> str:
    return (
        f"health {sample['health_s'] * 1000:7.1f} ms   job {sample['job_s']:5.2f} s   "
        f"billed {sample['billable_s']:.0f} s"
    )


def summarize(samples: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    medians = {
        path: {key: statistics.median(s[key] for s in taken) for key in taken[0]}
        for path, taken in samples.items()
    }
    health_ratio = medians["polled"]["health_s"] / medians["idle"]["health_s"]
    job_ratio = medians["polled"]["job_s"] / medians["idle"]["job_s"]
    return {
        "medians": medians,
        "health_ratio": round(health_ratio, 2),
        "job_ratio": round(job_ratio, 3),
        "limits": LIMITS,
        "within_limits": health_ratio <= LIMITS["health_ratio"]
        and job_ratio <= LIMITS["job_ratio"],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trainops-longpoll-") as tmp:
        bench = Bench(args, Path(tmp))
        try:
            bench.run()
        except BenchError as exc:
            print(f"longpoll_contention: {exc}", file=sys.stderr)
            return 1
    result = {"polls": args.polls, "rounds": args.rounds, "samples": bench.samples}
    result |= summarize(bench.samples)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print()
    print(f"{'figure':<36}{'value':>10}{'limit':>10}")
    print(f"{'/health, polled / idle (median)':<36}{result['health_ratio']:>10.2f}{'<= 5':>10}")
    print(f"{'short job, polled / idle (median)':<36}{result['job_ratio']:>10.3f}{'<= 1.5':>10}")
    print(f"written to {args.out}")
    return 0 if result["within_limits"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
