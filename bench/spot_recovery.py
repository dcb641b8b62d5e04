"""Spot recovery: the time from an interruption to the script running again, and the work it loses.

A real ``trainops server`` (loopback, fresh home) runs the job of bench/spot/steps.py as a spot
job with checkpoints: fixed 0.1 s steps, a checkpoint every k steps. Each round runs every
configuration once, in an order that rotates from round to round (interleaved, so that the load
of the machine falls on all alike). Each run is interrupted once, at a random moment after the
job is training (``interrupt_job`` with a 1 s notice and no capacity gap; the script dies at the
SIGTERM), and stopped once its second attempt has restored its checkpoint. Measured per run:

- recovery: from the interrupt request to the new attempt's script having restored its
  checkpoint (``spot-bench resumed``), and to its first line (``spot-bench start``);
- restore: what of that is the checkpoint's restore: the second attempt's Downloading (the
  agent restores /opt/ml/checkpoints from the object store there) plus the script's own read;
  target: recovery <= restore + 3 s;
- work lost: from the step the restored checkpoint was taken at to the interruption, against the
  model E[L] = tau/2 + R (tau the checkpoint interval, R the recovery; benchmarks.md §3.3).

On Ray, the same measurement against Ray Train's own restart comes from bench/_spot_ray.py
(spot-ray's: its ``measure_ray_recovery(rounds, workdir)`` returns a dict) when it is there.
JSON to bench/results/spot_recovery.json, the table to bench/README.md.

    python bench/spot_recovery.py [--rounds 5] [--seed 0] [--skip-ray]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _processes import ProcessSweeper, compile_trainops, free_port, http_ok, tool, wait_until
from _report import machine, positive, update_section, versions, write_json

BENCH = Path(__file__).resolve().parent
STEP_SECONDS = 0.1
NOTICE_SECONDS = 1.0
TARGET_OVERHEAD_S = 3.0
SYNCED = re.compile(r"Checkpoints synced to .* in ([0-9.]+) s\)")
LINE = re.compile(r"^(spot-bench start|spot-bench resumed|checkpoint|step)\b.*?t=([0-9.]+)")


@dataclass(frozen=True)
class Config:
    """One configuration: checkpoint every ``every`` steps of 0.1 s, of ``mb`` MB each."""

    every: int
    mb: float

    @property
    def name(self) -> str:
        return f"tau={self.every * STEP_SECONDS:g}s/{self.mb:g}MB"

    @property
    def tau(self) -> float:
        return self.every * STEP_SECONDS


CONFIGS = (Config(5, 1), Config(10, 1), Config(20, 1), Config(10, 64))


@dataclass(frozen=True)
class Sample:
    """One interrupted run's figures (seconds)."""

    config: str
    tau: float
    interrupted_after: float
    recovery_to_start: float
    recovery: float
    restore: float
    overhead: float
    work_lost: float
    last_sync: float | None
    phases: dict[str, float]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=positive, default=5, help="runs per configuration")
    parser.add_argument("--seed", type=int, default=0, help="seeds the interruption moments")
    parser.add_argument("--skip-ray", action="store_true", help="do not run the Ray part")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "spot_recovery.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    return parser.parse_args(argv)


@contextlib.contextmanager
def control_plane(workdir: Path) -> Iterator[Any]:
    """A ``trainops server`` on a loopback port for a fresh home; yields a client of it."""
    home, port = workdir / "home", free_port()
    home.mkdir(parents=True)
    os.environ["TRAINOPS_HOME"] = str(home)
    for name in ("TRAINOPS_SERVER", "TRAINOPS_TOKEN"):
        os.environ.pop(name, None)
    sweeper = ProcessSweeper()
    argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
    proc = sweeper.spawn(argv, dict(os.environ), workdir / "server.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_ok(f"{url}/api/v1/health"), "trainops server", proc,
                   workdir / "server.log", 60)  # fmt: skip
        from trainops.client import connect

        with connect() as client:
            yield client
    finally:
        sweeper.stop_all()


def submit(client: Any, config: Config, workdir: Path) -> str:
    from trainops._settings import Settings
    from trainops.client import submit_job
    from trainops.spec import JobSpec

    steps = 400  # longer than any run lasts: each is stopped once it has resumed
    spec = JobSpec(
        base_job_name="spot-recovery",
        entry_point="steps.py",
        source_dir=str(BENCH / "spot"),
        instance_type="ml.m5.large",
        use_spot_instances=True,
        hyperparameters={"steps": steps, "step-seconds": STEP_SECONDS,
                         "checkpoint-every": config.every, "checkpoint-mb": config.mb},
        checkpoint={"uri": (workdir / "checkpoints" / f"{time.monotonic_ns()}").as_uri() + "/"},
        stopping_condition={"max_runtime_in_seconds": 600, "max_wait_time_in_seconds": 1200},
    )  # fmt: skip
    return submit_job(client, spec, Settings.load(), progress=False, on_warning=lambda _w: None)


class Log:
    """The job's lines of interest, read incrementally, in order: ``(kind, step, t)`` each
    (``kind``: start, resumed, step, checkpoint; ``t``: the script's own clock)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client, self.name, self.cursor = client, name, 0
        self.entries: list[tuple[str, int, float]] = []
        self.restores: list[float] = []  # each attempt's own read of its checkpoint (restore_s)
        self.syncs: list[float] = []  # each last checkpoint sync's seconds, as the agent says

    def read(self) -> list[tuple[str, int, float]]:
        from trainops.client import page_lines

        page = self.client.logs(self.name, after=self.cursor, limit=5000)
        for line in page_lines(page):
            self.cursor = max(self.cursor, int(line["cursor"]))
            if synced := SYNCED.search(line["line"]):
                self.syncs.append(float(synced.group(1)))
            if match := LINE.match(line["line"]):
                step = re.search(r"step=(\d+)", line["line"])
                kind = match.group(1).removeprefix("spot-bench ")
                if kind == "resumed":
                    self.restores.append(float(line["line"].rsplit("restore_s=", 1)[1]))
                self.entries.append(
                    (kind, int(step.group(1)) if step else 0, float(match.group(2)))
                )
        return self.entries

    def attempts(self) -> list[list[tuple[str, int, float]]]:
        """The entries split at each ``start``: one list per attempt."""
        split: list[list[tuple[str, int, float]]] = []
        for entry in self.read():
            if entry[0] == "start":
                split.append([])
            if split:
                split[-1].append(entry)
        return split


def resumed(attempt: list[tuple[str, int, float]]) -> tuple[str, int, float] | None:
    return next((e for e in attempt if e[0] == "resumed"), None)


def measure(client: Any, config: Config, workdir: Path, rng: random.Random) -> Sample:
    name = submit(client, config, workdir)
    log = Log(client, name)
    wait_value(lambda: len(log.attempts()) == 1 and resumed(log.attempts()[0]), 120)
    time.sleep(rng.uniform(1.0, 3.0))  # the interruption's moment: uniform, whatever the phase
    interrupted = time.time()
    client.interrupt_job(name, notice_seconds=NOTICE_SECONDS, capacity_gap_seconds=0.0)
    wait_value(lambda: len(log.attempts()) > 1 and resumed(log.attempts()[1]), 120)
    client.stop(name)
    described = wait_value(lambda: ended(client, name), 120)
    first, second = log.attempts()[:2]
    again = resumed(second)
    assert again is not None
    phases = last_phases(described)
    restore = phases.get("Downloading", 0.0) + log.restores[1]
    recovery = again[2] - interrupted
    return Sample(config.name, config.tau, interrupted - first[0][2], second[0][2] - interrupted,
                  recovery, restore, recovery - restore, work_lost(first, again[1]),
                  log.syncs[0] if log.syncs else None, phases)  # fmt: skip


def work_lost(first: list[tuple[str, int, float]], restored: int) -> float:
    """From the restored step's end to the last step the first attempt finished before it died
    (within a step of its death)."""
    steps = [e for e in first if e[0] == "step"]
    done = next((e[2] for e in steps if e[1] == restored), None)
    began = done if done is not None else first[0][2]
    return steps[-1][2] - began if steps else 0.0


def ended(client: Any, name: str) -> dict[str, Any] | None:
    described: dict[str, Any] = client.describe(name)
    return (
        described if described["TrainingJobStatus"] in {"Completed", "Failed", "Stopped"} else None
    )


def last_phases(described: dict[str, Any]) -> dict[str, float]:
    """How long the recovery's statuses lasted: the last Interrupted and what followed it up to
    Training (each from its start to the next status's start)."""
    transitions = described["SecondaryStatusTransitions"]
    marks = [i for i, t in enumerate(transitions) if t["Status"] == "Interrupted"]
    phases: dict[str, float] = {}
    first = marks[-1] if marks else 0
    for here, after in zip(transitions[first:], transitions[first + 1 :], strict=False):
        if here["Status"] == "Training":
            break
        begin = dt.datetime.fromisoformat(here["StartTime"])
        phases[here["Status"]] = (
            dt.datetime.fromisoformat(after["StartTime"]) - begin
        ).total_seconds()
    return phases


def wait_value(produce: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = produce()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"spot_recovery: nothing after {timeout} s")


def summarise(samples: list[Sample]) -> dict[str, Any]:
    by_config: dict[str, Any] = {}
    for config in CONFIGS:
        mine = [s for s in samples if s.config == config.name]
        if not mine:
            continue
        recovery = statistics.median(s.recovery for s in mine)
        lost = statistics.mean(s.work_lost for s in mine)
        by_config[config.name] = {
            "runs": len(mine),
            "median_recovery_s": recovery,
            "median_recovery_to_start_s": statistics.median(s.recovery_to_start for s in mine),
            "median_restore_s": statistics.median(s.restore for s in mine),
            "median_overhead_s": statistics.median(s.overhead for s in mine),
            "median_last_sync_s": statistics.median(
                s.last_sync for s in mine if s.last_sync is not None
            )
            if any(s.last_sync is not None for s in mine)
            else None,
            "mean_work_lost_s": lost,
            "model_work_lost_s": config.tau / 2,
            "mean_loss_per_interruption_s": lost + statistics.mean(s.recovery for s in mine),
            "model_loss_per_interruption_s": config.tau / 2 + recovery,
        }
    return by_config


def ray_part(rounds: int, workdir: Path) -> dict[str, Any] | None:
    """The Ray backend against Ray Train's own restart (bench/_spot_ray.py), with its table."""
    try:
        module = importlib.import_module("_spot_ray")
    except ModuleNotFoundError:
        return None
    result: dict[str, Any] = module.measure_ray_recovery(rounds=rounds, workdir=workdir)
    return {**result, "table": module.table(result)}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def render(result: dict[str, Any]) -> str:
    rows = [
        "| configuration | runs | recovery | to script start | restore | recovery - restore "
        "(target ≤ 3 s) | of it: the last sync | work lost, measured | work lost, model τ/2 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, fig in result["local"].items():
        rows.append(
            f"| {name} | {fig['runs']} | {fig['median_recovery_s']:.2f} s "
            f"| {fig['median_recovery_to_start_s']:.2f} s | {fig['median_restore_s']:.2f} s "
            f"| {fig['median_overhead_s']:.2f} s | {_seconds(fig['median_last_sync_s'])} "
            f"| {fig['mean_work_lost_s']:.2f} s "
            f"| {fig['model_work_lost_s']:.2f} s |"
        )
    load = ", ".join(f"{x:.1f}" for x in result["load_average_at_end"])
    lines = [f"Measured {result['date'][:10]} on {result['machine']['cpu_model']} "
             f"({result['machine']['usable_cores']} usable cores; load average {load} at the end), "
             f"{result['rounds']} interleaved rounds (medians; work lost as means), local "
             "backend:", "", *rows]  # fmt: skip
    if result.get("ray"):
        lines += ["", f"On Ray ({result['ray']['cluster']}, bench/_spot_ray.py):", "",
                  result["ray"]["table"]]  # fmt: skip
    return "\n".join(lines)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    rng, samples = random.Random(args.seed), []
    with control_plane(workdir) as client:
        for index in range(args.rounds):
            shift = index % len(CONFIGS)
            for config in CONFIGS[shift:] + CONFIGS[:shift]:
                sample = measure(client, config, workdir, rng)
                samples.append(sample)
                phases = " ".join(f"{k}={v:.2f}" for k, v in sample.phases.items())
                phases += f" last sync={_seconds(sample.last_sync)}"
                print(f"round {index + 1} {config.name}: recovery {sample.recovery:.2f} s, "
                      f"restore {sample.restore:.2f} s, lost {sample.work_lost:.2f} s ({phases})",
                      flush=True)  # fmt: skip
    return {
        "benchmark": "spot_recovery",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "machine": machine(),
        "load_average_at_end": os.getloadavg(),  # the machine may be shared: say how busy
        "versions": versions(),
        "target_overhead_s": TARGET_OVERHEAD_S,
        "samples": [asdict(s) for s in samples],
        "local": summarise(samples),
        "ray": None if args.skip_ray else ray_part(args.rounds, workdir),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_trainops()
    workdir = Path(tempfile.mkdtemp(prefix="tosr-", dir="/tmp"))
    try:
        result = run(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    write_json(result, args.out)
    update_section(args.readme, "spot_recovery", render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
