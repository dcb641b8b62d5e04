"""Launch overhead: what ``trainops run`` adds to a hello-world job, next to Ray Train as the peer.

Five paths run the same job (bench/hello/hello.py prints ``hello from algo-1`` and exits), each
as a fresh process, interleaved: a warm-up round, then ``--runs`` timed rounds, each running every
path once (in an order that rotates from round to round):

- bare:          ``python hello.py``
- trainops cold: ``trainops run hello.yaml`` with no server configured (the command starts an
                 embedded server on a loopback port)
- trainops warm: the same with ``TRAINOPS_SERVER`` pointing at a ``trainops server`` started once
- ray cold:      ``ray_train_hello.py`` (TorchTrainer, one CPU worker) whose
                 ``ray.init(address="local")`` starts a new local Ray inside the process
- ray warm:      the same joining a ``ray start --head`` cluster started once (``RAY_ADDRESS``)

Overhead = median(path) - median(bare). Results go to bench/results/launch_overhead.json and
the table in bench/README.md. Everything listens on 127.0.0.1 only, and every process the
benchmark starts is stopped before it exits, also on errors and Ctrl-C.

    python bench/launch_overhead.py [--runs 10] [--skip-ray] [--skip-trainops]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from _processes import (
    BenchError,
    ProcessSweeper,
    compile_trainops,
    free_port,
    http_ok,
    port_open,
    run_timed,
    tool,
    wait_until,
)
from _report import build_result, update_readme, write_json

BENCH = Path(__file__).resolve().parent
HELLO = BENCH / "hello"
EXPECT = "hello from algo-1"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per path (default 10)")
    parser.add_argument("--skip-ray", action="store_true", help="do not measure the Ray peer")
    parser.add_argument("--skip-trainops", action="store_true", help="do not measure trainops")
    parser.add_argument("--timeout", type=float, default=300, help="seconds allowed per run")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "launch_overhead.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def clean_env() -> dict[str, str]:
    """The caller's environment without settings that would point a run elsewhere."""
    drop = ("TRAINOPS_", "AWS_", "RAY_", "SM_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def ray_env(workdir: Path) -> dict[str, str]:
    return {
        **clean_env(),
        # Ray binds every service to the node IP; without clusters enabled that is 127.0.0.1.
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # Token auth as Ray defaults to it, but with the token in the environment, so nothing is
        # written to ~/.ray.
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
        "HELLO_RAY_TEMP_DIR": str(workdir / "ray-cold"),
    }


class Bench:
    """One benchmark run: its scratch folder, its processes, and the samples taken.

    The long-lived servers (a ``trainops server`` and a ``ray start --head``) are started once and
    stopped at the end; they have a sweeper of their own, so that sweeping what a cold run left
    behind never touches them. Each round runs every path once, in an order that rotates from
    round to round, so that drift on the machine is spread over all paths alike.
    """

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.sweeper = ProcessSweeper()
        self.servers = ProcessSweeper()
        self.samples: dict[str, list[float]] = {}
        self.stragglers: dict[str, int] = {}
        self.paths: list[Path_] = []

    def add_paths(self, stack: contextlib.ExitStack) -> None:
        """The paths to measure, with the servers the warm ones need started."""
        self.paths.append(Path_("bare", [sys.executable, str(HELLO / "hello.py")],
                                {**clean_env(), "SM_CURRENT_HOST": "algo-1"}))  # fmt: skip
        if not self.args.skip_trainops:
            run = [*tool("trainops"), "run", str(HELLO / "hello.yaml")]
            cold = {**clean_env(), "TRAINOPS_HOME": str(self.workdir / "trainops-cold")}
            self.paths.append(Path_("trainops_cold", run, cold, sweep=True))
            home = self.workdir / "trainops-warm"
            url = stack.enter_context(self.trainops_server(home))
            warm = {**clean_env(), "TRAINOPS_HOME": str(home), "TRAINOPS_SERVER": url}
            self.paths.append(Path_("trainops_warm", run, warm))
        if not self.args.skip_ray:
            env = ray_env(self.workdir)
            driver = [sys.executable, str(HELLO / "ray_train_hello.py")]
            self.paths.append(Path_("ray_cold", driver, env, sweep=True))
            address = stack.enter_context(self.ray_head(env))
            self.paths.append(Path_("ray_warm", driver, {**env, "RAY_ADDRESS": address}))

    def run_rounds(self) -> None:
        for index in range(self.args.runs + 1):  # round 0 is the warm-up
            shift = index % len(self.paths)
            order = self.paths[shift:] + self.paths[:shift]
            label = "warm-up" if index == 0 else f"round {index}"
            print(f"{label:<9}", end="", flush=True)
            for path in order:
                elapsed = self.run_once(path)
                if index > 0:
                    self.samples.setdefault(path.name, []).append(elapsed)
                print(f" {path.name}={elapsed:.2f}", end="", flush=True)
            print(flush=True)
        for name, times in self.samples.items():
            print(f"{name:<14} median {statistics.median(times):.3f} s")

    def run_once(self, path: Path_) -> float:
        elapsed = run_timed(path.argv, path.env, self.sweeper, EXPECT, self.args.timeout)
        if path.sweep:
            # Outside the timed region: nothing a run left behind carries into the next one.
            left = self.sweeper.stop_all()
            self.stragglers[path.name] = self.stragglers.get(path.name, 0) + left
        return elapsed

    @contextmanager
    def trainops_server(self, home: Path) -> Iterator[str]:
        port = free_port()
        argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
        log = self.workdir / "trainops-server.log"
        proc = self.servers.spawn(argv, {**clean_env(), "TRAINOPS_HOME": str(home)}, log)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until(lambda: http_ok(f"{url}/api/v1/health"), "trainops server", proc, log, 60)
            yield url
        finally:
            self.servers.stop_all()

    @contextmanager
    def ray_head(self, env: Mapping[str, str]) -> Iterator[str]:
        port, dashboard = free_port(), free_port()
        argv = [
            *tool("ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
            f"--port={port}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
            "--disable-usage-stats", f"--temp-dir={self.workdir / 'ray-warm'}",
        ]  # fmt: skip
        log = self.workdir / "ray-head.log"
        proc = self.servers.spawn(argv, env, log)

        def ready() -> bool:
            return port_open(port) and "Ray runtime started" in log.read_text(errors="replace")

        try:
            wait_until(ready, "ray head", proc, log, 120)
            yield f"127.0.0.1:{port}"
        finally:
            self.servers.stop_all()


@dataclass(frozen=True)
class Path_:
    """One way of running the hello job: its command, environment, and whether to sweep after."""

    name: str
    argv: list[str]
    env: dict[str, str]
    sweep: bool = False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_trainops()  # as an installed package is (see _processes.compile_trainops)
    # Short path: Ray puts unix sockets under its temp dir, and those paths are length-limited.
    workdir = Path(tempfile.mkdtemp(prefix="tob-", dir="/tmp"))
    bench = Bench(args, workdir)
    try:
        with contextlib.ExitStack() as stack:
            bench.add_paths(stack)
            bench.run_rounds()
    except BenchError as exc:
        print(f"\nlaunch_overhead: {exc}", file=sys.stderr)
        return 1
    finally:
        bench.sweeper.stop_all()
        bench.servers.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    result = build_result(bench.samples, args.runs, bench.stragglers)
    write_json(result, args.out)
    update_readme(result, args.readme)
    print(f"wrote {args.out} and the table in {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
