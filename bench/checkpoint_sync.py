"""Checkpoint sync: how fast a finished checkpoint becomes visible, and what it costs the script.

A synthetic training script (a separate process, as under an agent) runs ``--steps`` steps of a
numpy matmul sized to about 12 ms each and, every ``--every`` steps, writes a ``--ckpt-mb`` MB
checkpoint into its checkpoint directory (written in 8 MB pieces, then closed). It records every
step's compute time (the checkpoint write itself is not part of a step) and the moment each
checkpoint was closed.

Modes, in an order rotated per round:

- off:      nothing watches the directory
- trainops: a ``DirectorySync`` mirrors it to the store (the agent's background uploader process),
            reporting when each file became visible under its final name
- s5cmd:    (s3:// only) each checkpoint is sent by ``s5cmd cp`` as soon as it is closed, at the
            uploader's priority: the peer, which tells the client's cost from the server's

each with the script's BLAS on all cores (``--threads 0``: every core busy with the step, so any
other work on the machine comes out of it) and on one thread (a core left free); the matrix is
calibrated to ~``--step-ms`` for each thread count.

Figures, for file:// and for s3:// (a loopback SeaweedFS started by the script, on the same
cores): step time p50/p99 with sync on over off (target: p99 ratio ≤ 1.2), upload lag (close →
visible under the final name) median and p95, and the CPU each checkpoint costs the uploader and
the server.

    python bench/checkpoint_sync.py [--rounds 3] [--steps 400] [--every 100] [--schemes file,s3]
                                    [--threads 0,1] [--no-peer]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _sched_trace import SchedTrace, stolen
from _storage_bench import BENCH, header, publish, seaweed, tool

TARGET_P99_RATIO = 1.2
SECTION = "checkpoint_sync"
MB = 1_000_000
SLOW_STEP = 1.5  # a step this many times the run's median is slow: who ran while it waited?
WHO = ("uploader", "server", "other")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every", type=int, default=100, help="steps between checkpoints")
    parser.add_argument("--ckpt-mb", type=int, default=200)
    parser.add_argument("--step-ms", type=float, default=12.0)
    parser.add_argument("--schemes", default="file,s3")
    parser.add_argument(
        "--out", type=Path, help="default: results/<section>.json (see --server-priority)"
    )
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    parser.add_argument(
        "--threads",
        default="0,1",
        help="the script's BLAS thread counts to measure, 0 meaning all cores (default: 0,1)",
    )
    parser.add_argument("--no-peer", dest="peer", action="store_false", help="skip s5cmd on s3://")
    parser.add_argument(
        "--server-priority",
        choices=("idle", "normal"),
        default="idle",
        help="idle (default): every SeaweedFS thread at SCHED_IDLE, a stand-in for a remote S3 "
        "whose CPU is not the host's; normal: the server competes with the script",
    )
    parser.add_argument(
        "--server-disk",
        choices=("memory", "disk"),
        default="memory",
        help="memory (default): SeaweedFS keeps its volumes on tmpfs (/dev/shm), so receiving a "
        "checkpoint writes nothing back to this machine's disk, as with a remote S3; disk: in "
        "the bench's temporary directory",
    )
    parser.add_argument("--nice", type=int, default=10, help="the uploader's nice increment")
    parser.add_argument(
        "--uploader-priority",
        choices=("idle", "batch"),
        default="idle",
        help="idle: SCHED_IDLE + idle I/O class (the default); batch: nice + SCHED_BATCH",
    )
    parser.add_argument(
        "--attribute",
        choices=("auto", "on", "off"),
        default="auto",
        help="trace the kernel's context switches (tracefs, root) to say who ran while the "
        "script's slow steps waited: the uploader, the S3 server or anything else "
        "(auto: where tracefs is writable)",
    )
    parser.add_argument(
        "--script-cpus",
        help="CPUs (as 0-3,6) for the script and the uploader under test; default: all",
    )
    parser.add_argument(
        "--server-cpus",
        help="CPUs for SeaweedFS, apart from --script-cpus: a server whose work is not the "
        "script's host's, as a remote S3's is not (needs cores to spare); default: the "
        "script's",
    )
    parser.add_argument("--matrix-n", type=int, default=0, help="matmul size (default: calibrate)")
    parser.add_argument("--script", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--calibrate-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.schemes = [s for s in args.schemes.split(",") if s]
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        parser.error("--threads: comma-separated whole numbers, 0 meaning all cores")
    if not args.threads or min(args.threads) < 0:
        parser.error("--threads: comma-separated whole numbers, 0 meaning all cores")
    if not set(args.schemes) <= {"file", "s3"}:
        parser.error("--schemes: file, s3")
    for name in ("script_cpus", "server_cpus"):
        value = getattr(args, name)
        if value is not None:
            try:
                setattr(args, name, sorted(_cpu_list(value)))
            except ValueError as exc:
                parser.error(f"--{name.replace('_', '-')}: {exc}")
    if args.script_cpus and args.server_cpus and set(args.script_cpus) & set(args.server_cpus):
        parser.error("--script-cpus and --server-cpus must not share a CPU")
    return args


def _cpu_list(text: str) -> set[int]:
    """``"0-3,6"`` -> {0, 1, 2, 3, 6}, each one this process may run on."""
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _sep, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"{part!r} is not a CPU number or a range like 0-3")
        cpus.update(range(int(low), int(high or low) + 1))
    usable = os.sched_getaffinity(0)
    if not cpus or not cpus <= usable:
        raise ValueError(f"CPUs {sorted(cpus)} are not all usable here ({sorted(usable)})")
    return cpus


# The training script ---------------------------------------------------------------------------


def script(args: argparse.Namespace) -> int:
    import numpy as np

    ckpt_dir = args.script
    n = args.matrix_n or _calibrate(np, args.step_ms / 1000)
    if args.calibrate_only:
        print(json.dumps({"n": n}))
        return 0
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    payload = np.random.default_rng(1).bytes(8 * MB)
    steps, closes, marks = [], [], []
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        a @ b
        end = time.perf_counter()
        steps.append(end - start)
        marks.append((start, end))
        if step % args.every == 0:
            name = f"ckpt-{step:06d}.pt"
            with (ckpt_dir / name).open("wb") as out:
                for _ in range(args.ckpt_mb // 8):
                    out.write(payload)
            closes.append({"name": name, "closed": time.time()})
    print(json.dumps({"n": n, "steps_s": steps, "closes": closes, "marks": marks}))
    return 0


def _calibrate(np: Any, target: float) -> int:
    """The matrix size whose product takes about ``target`` seconds here.

    Timed at n = 1024 (best of 9: other load on the machine only slows a run), scaled by the
    cube root; small sizes are not timed, BLAS thread hand-offs dominate them under load.
    """
    a = np.ones((1024, 1024), dtype=np.float32)
    a @ a
    times = []
    for _ in range(9):
        start = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - start)
    scale: float = (target / min(times)) ** (1 / 3)  # a float power is Any to the checker
    return max(64, round(1024 * scale / 32) * 32)


# The harness -----------------------------------------------------------------------------------


class S5cmdMirror:
    """The peer, for scale: each checkpoint sent by ``s5cmd cp`` as soon as it is closed.

    Closes come from the same inotify watch the uploader uses; each ``s5cmd`` runs at the
    uploader's priority, one at a time, so what differs from trainops is the client alone.
    """

    def __init__(
        self,
        local: Path,
        prefix: str,
        s5cmd: list[str],
        env: dict[str, str],
        nice: int,
        idle: bool,
    ) -> None:
        from trainops.agent.reporting._watch import Inotify

        self.local, self.prefix, self.s5cmd, self.env = local, prefix, s5cmd, env
        self.nice, self.idle = nice, idle
        self.watch = Inotify(local)
        self.visible: dict[str, float] = {}
        self.errors: list[str] = []
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="s5cmd-mirror", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.watch.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for event in self.watch.read(0.05):
                if event.kind == "closed":
                    self._send(event.rel)

    def _send(self, rel: str) -> None:
        from trainops.agent.reporting._sync import _lower_priority

        argv = [*self.s5cmd, "cp", str(self.local / rel), f"{self.prefix}/{rel}"]

        def lower() -> None:  # in the child, after setsid: placed as trainops' uploader is
            _lower_priority(self.nice, idle=self.idle)

        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                argv,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                preexec_fn=lower,
            )
            _pid, status, usage = os.wait4(proc.pid, 0)
            self.cpu_s += usage.ru_utime + usage.ru_stime
            if os.waitstatus_to_exitcode(status) != 0:
                err.seek(0)
                self.errors.append(err.read().decode(errors="replace")[-500:])
            else:
                self.visible.setdefault(rel, time.time())


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.samples: dict[str, list[dict[str, Any]]] = {}
        self.matrix_n: dict[int, int] = args.matrix_sizes  # per thread count

    server_pid: int | None = None  # the SeaweedFS process, whose CPU is reported beside ours
    s5cmd: list[str] | None = None  # s5cmd and its endpoint, where the peer runs (s3://)
    s5cmd_env: dict[str, str] = {}

    def run_once(
        self, scheme: str, root: str, settings: Any, threads: int, mode: str, run: int
    ) -> None:
        from trainops.agent import DirectorySync
        from trainops.storage import join_uri, store_for

        tag = f"{scheme}-{threads}-{mode}-{run}"
        local = self.workdir / f"ckpt-{tag}"
        local.mkdir(parents=True)
        prefix = join_uri(root, f"run-{tag}")
        visible: dict[str, float] = {}
        errors: list[str] = []
        sync: DirectorySync | None = None
        peer: S5cmdMirror | None = None
        if mode == "trainops":
            sync = DirectorySync(
                local,
                prefix,
                store_for(prefix, settings),
                propagate_deletes=True,
                on_error=errors.append,
                on_uploaded=lambda rel: _first(visible, rel),
                nice=self.args.nice,
                idle=self.args.uploader_priority == "idle",
                eager=True,  # as the agent's checkpoint sync: started before the script
            )
            sync.start()
        elif mode == "s5cmd":
            assert self.s5cmd is not None
            idle = self.args.uploader_priority == "idle"
            peer = S5cmdMirror(local, prefix, self.s5cmd, self.s5cmd_env, self.args.nice, idle)
            peer.start()
        server_cpu = _process_tree_cpu(self.server_pid)
        argv = [sys.executable, str(Path(__file__).resolve()), "--script", str(local)]
        argv += ["--steps", str(self.args.steps), "--every", str(self.args.every)]
        argv += ["--ckpt-mb", str(self.args.ckpt_mb), "--matrix-n", str(self.matrix_n[threads])]
        trace = SchedTrace() if self.args.attribute == "on" else None
        uploader = sync.worker_pid if sync is not None else None
        if trace is not None:
            trace.start()
        try:
            script = subprocess.Popen(  # a session of its own, as the agent starts a script
                argv,
                stdout=subprocess.PIPE,
                text=True,
                env=_script_env(threads),
                start_new_session=True,
            )
            stdout, _ = script.communicate()
        finally:
            traced = trace.stop() if trace is not None else None
        if script.returncode != 0:
            raise SystemExit(f"the training script exited with {script.returncode}")
        result = json.loads(stdout.strip().splitlines()[-1])
        names = {c["name"] for c in result["closes"]}
        cpu_before = _children_cpu()  # the script is reaped; the uploader is not yet
        client_cpu = 0.0
        if sync is not None or peer is not None:
            seen = visible if peer is None else peer.visible
            deadline = time.monotonic() + 300
            while not names <= set(seen) and time.monotonic() < deadline:
                time.sleep(0.05)
            if sync is not None:
                sync.stop()
                client_cpu = _children_cpu() - cpu_before
            if peer is not None:
                peer.stop()
                client_cpu, errors, visible = peer.cpu_s, peer.errors, peer.visible
            if errors or not names <= set(visible):
                raise SystemExit(f"{mode} failed: {errors or 'not every checkpoint was uploaded'}")
        server_cpu = _process_tree_cpu(self.server_pid) - server_cpu
        shutil.rmtree(local)
        steps = sorted(result["steps_s"])
        taken: dict[str, float] | None = None
        running: dict[str, float] = {}
        if traced is not None:
            classify = _classifier(traced[1], script.pid, uploader, self.server_pid)
            slow = [
                m for m in result["marks"] if m[1] - m[0] > SLOW_STEP * statistics.median(steps)
            ]
            seconds = stolen(traced[0], slow, classify)
            taken = {"slow_steps": len(slow), **{w: 1000 * seconds.get(w, 0.0) for w in WHO}}
            whole = [(result["marks"][0][0], result["marks"][-1][1])]
            running = stolen(traced[0], whole, classify)
        sample = {
            "step_p50_ms": 1000 * statistics.median(steps),
            "step_p99_ms": 1000 * _percentile(steps, 0.99),
            "matrix_n": result["n"],
            "server_cpu_s_per_ckpt": server_cpu / len(result["closes"]),
        }
        if taken is not None:
            sample["slow_steps_taken_ms"] = taken
            sample["cpu_while_script_ran_s"] = {w: running.get(w, 0.0) for w in WHO}
        if mode != "off":
            lags = sorted(visible[c["name"]] - c["closed"] for c in result["closes"])
            sample["lags_s"] = lags
            sample["uploader_cpu_s_per_ckpt"] = client_cpu / len(lags)
        self.samples.setdefault(f"{scheme}/{threads}/{mode}", []).append(sample)
        lag = f"lag median {statistics.median(sample['lags_s']):.2f} s" if mode != "off" else ""
        print(
            f"round {run + 1} {scheme:<4} threads {threads or 'all'} {mode:<8} "
            f"p50 {sample['step_p50_ms']:6.1f} ms  p99 {sample['step_p99_ms']:6.1f} ms  {lag}",
            flush=True,
        )

    def run_scheme(self, scheme: str, root: str, settings: Any) -> None:
        modes = ["off", "trainops"] + (["s5cmd"] if scheme == "s3" and self.s5cmd else [])
        for run in range(self.args.rounds):
            order = modes[run % len(modes) :] + modes[: run % len(modes)]
            for threads in self.args.threads:
                for mode in order:
                    self.run_once(scheme, root, settings, threads, mode, run)


def _script_env(threads: int) -> dict[str, str]:
    count = str(threads or len(os.sched_getaffinity(0)))
    return {**os.environ, "OMP_NUM_THREADS": count, "OPENBLAS_NUM_THREADS": count}


def _first(seen: dict[str, float], rel: str) -> None:
    """Note when ``rel`` first became visible."""
    seen.setdefault(rel, time.time())


def _classifier(
    threads: dict[int, tuple[int, str]], script: int, uploader: int | None, server: int | None
) -> Callable[[int], str]:
    """Who a traced thread is: the script, the uploader under test (trainops' uploader process
    or an s5cmd), the S3 server, idle, or other."""

    def classify(tid: int) -> str:
        if tid == 0:
            return "idle"
        process, name = threads.get(tid, (-1, ""))
        if process == script:
            return "script"
        if (uploader is not None and process == uploader) or name == "s5cmd":
            return "uploader"
        if server is not None and process == server:
            return "server"
        return "other"

    return classify


def _process_tree_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        times = proc.cpu_times()
        total += times.user + times.system
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _percentile(ordered: list[float], q: float) -> float:
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _figures(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> dict[str, Any]:
    lags = sorted(lag for s in on for lag in s["lags_s"])
    p50 = {
        m: statistics.median(s["step_p50_ms"] for s in runs)
        for m, runs in (("off", off), ("on", on))
    }
    p99 = {
        m: statistics.median(s["step_p99_ms"] for s in runs)
        for m, runs in (("off", off), ("on", on))
    }
    figures = {
        "step_p50_ms": p50,
        "step_p99_ms": p99,
        "p50_ratio": p50["on"] / p50["off"],
        "p99_ratio": p99["on"] / p99["off"],
        "lag_median_s": statistics.median(lags),
        "lag_p95_s": _percentile(lags, 0.95),
        "checkpoints": len(lags),
        "matrix_n": on[0]["matrix_n"],
        "uploader_cpu_s_per_ckpt": statistics.median(s["uploader_cpu_s_per_ckpt"] for s in on),
        "server_cpu_s_per_ckpt": {
            mode: statistics.median(s["server_cpu_s_per_ckpt"] for s in runs)
            for mode, runs in (("off", off), ("on", on))
        },
    }
    figures["target_met"] = figures["p99_ratio"] <= TARGET_P99_RATIO
    traced = [s["slow_steps_taken_ms"] for s in on if "slow_steps_taken_ms" in s]
    if traced:
        figures["slow_steps_taken_ms"] = {
            key: statistics.median(t[key] for t in traced) for key in ("slow_steps", *WHO)
        }
        figures["cpu_while_script_ran_s"] = {
            key: statistics.median(s["cpu_while_script_ran_s"][key] for s in on) for key in WHO
        }
    return figures


def build_result(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for key, on in bench.samples.items():
        scheme, threads, mode = key.split("/")
        if mode != "off":
            off = bench.samples[f"{scheme}/{threads}/off"]
            figures[key] = {
                "scheme": scheme,
                "threads": int(threads),
                "client": mode,
                **_figures(off, on),
            }
    skip = ("out", "readme", "script")
    return {
        **header(_section(args), {k: v for k, v in vars(args).items() if k not in skip}),
        "samples": bench.samples,
        "figures": figures,
        "target_p99_ratio": TARGET_P99_RATIO,
    }


def render_table(result: dict[str, Any]) -> str:
    rows = [
        "| store | uploader | script's BLAS threads | step p50 off / on (ms) | step p99 off / on (ms) | p99 on / off (target ≤ 1.2) | upload lag median / p95 (s) | uploader CPU per checkpoint (s) | SeaweedFS CPU per checkpoint (s) | CPU while the script ran: uploader / SeaweedFS (s per run) | slow steps per run | CPU they lost to the uploader / SeaweedFS / other (ms per run) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cores = result["machine"]["usable_cores"]
    for f in result["figures"].values():
        threads = f"{cores} (all cores)" if f["threads"] == 0 else f"{f['threads']}"
        met = "" if f["target_met"] else " (missed)"
        server = f"{f['server_cpu_s_per_ckpt']['on']:.2f}" if f["scheme"] == "s3" else "n/a"
        rows.append(
            f"| {f['scheme']}:// | {f['client']} | {threads} | "
            f"{f['step_p50_ms']['off']:.1f} / {f['step_p50_ms']['on']:.1f} | "
            f"{f['step_p99_ms']['off']:.1f} / {f['step_p99_ms']['on']:.1f} | "
            f"{f['p99_ratio']:.2f}{met} | {f['lag_median_s']:.2f} / {f['lag_p95_s']:.2f} | "
            f"{f['uploader_cpu_s_per_ckpt']:.2f} | {server} | {_taken(f)} |"
        )
    mach, args = result["machine"], result["args"]
    section = result["benchmark"]
    sizes = ", ".join(
        f"{n}² with {'all cores' if int(t) == 0 else f'{t} thread'}"
        for t, n in sorted(args["matrix_sizes"].items())
    )
    server = (
        "at SCHED_IDLE, every thread, its session at autogroup nice 19 (a stand-in for a remote S3)"
        if args.get("server_priority") == "idle"
        else "at normal priority, on the script's cores"
    )
    rows.append("")
    rows.append(
        f"Measured {result['date']} on {mach['cpu_model']}, {mach['usable_cores']} usable cores; "
        f"{args['steps']} steps of ~{args['step_ms']:.0f} ms (float32 matmul, {sizes}), a "
        f"{args['ckpt_mb']} MB checkpoint every {args['every']} steps; median of "
        f"{args['rounds']} interleaved rounds per mode; uploaders at "
        f"{'SCHED_IDLE' if args.get('uploader_priority', 'idle') == 'idle' else 'nice + SCHED_BATCH'}"
        " in sessions of their own, the script in its own; "
        f"SeaweedFS {server}{_placement(args)}. "
        f"Raw samples: [results/{section}.json](results/{section}.json)."
    )
    return "\n".join(rows)


def _placement(args: dict[str, Any]) -> str:
    script, server = args.get("script_cpus"), args.get("server_cpus")
    if not script and not server:
        return ""
    where = f"; script and uploaders on CPUs {script or 'all'}"
    return where + (f", SeaweedFS on CPUs {server}" if server else "")


def _taken(figures: dict[str, Any]) -> str:
    taken, running = figures.get("slow_steps_taken_ms"), figures.get("cpu_while_script_ran_s")
    if taken is None or running is None:
        return "n/a | n/a | n/a"
    during = f"{running['uploader']:.2f} / {running['server']:.2f}"
    lost = " / ".join(f"{taken[w]:.0f}" for w in WHO)
    return f"{during} | {taken['slow_steps']:.0f} | {lost}"


def _calibrated(args: argparse.Namespace, threads: int, workdir: Path) -> int:
    """The matrix size for ~``--step-ms`` steps with ``threads``, measured once: every run of that
    thread count computes the same steps."""
    argv = [sys.executable, __file__, "--script", str(workdir), "--calibrate-only"]
    argv += ["--step-ms", str(args.step_ms)]
    done = subprocess.run(
        argv, capture_output=True, text=True, check=True, env=_script_env(threads)
    )
    n = int(json.loads(done.stdout)["n"])
    print(f"threads {threads or 'all'}: matrix {n} x {n} for ~{args.step_ms:.0f} ms steps")
    return n


def _section(args: argparse.Namespace) -> str:
    """The README section (and default result file): the server on the host's cores at normal
    priority is a table of its own."""
    return (
        SECTION
        if args.server_priority == "idle" or "s3" not in args.schemes
        else (f"{SECTION}_server_on_host")
    )


def _tree_threads(pid: int) -> list[int]:
    """The thread ids of ``pid`` and its descendants, as they are now."""
    import psutil

    root = psutil.Process(pid)
    return [t.id for proc in [root, *root.children(recursive=True)] for t in proc.threads()]


def _pin_tree(pid: int, cpus: set[int]) -> None:
    """Keep every thread of ``pid`` and its descendants on ``cpus`` (threads started later
    inherit it from the thread that starts them)."""
    for thread in _tree_threads(pid):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(thread, cpus)


def _idle_tree(pid: int) -> None:
    """Put every thread of ``pid`` and its descendants at ``SCHED_IDLE`` with the idle I/O class,
    and the session ``pid`` leads (the server is started in one of its own) at autogroup nice 19.

    Thread by thread: a process-wide call moves only the main thread, and a Go server's other
    threads (started already) would keep competing with the script. Threads started later
    inherit the policy from the thread that starts them. The session's autogroup: where the
    kernel groups by session, ``SCHED_IDLE`` threads in a session other than the script's would
    otherwise take half of a contended core (see
    ``trainops.agent.reporting._priority.lower_session``).
    """
    import psutil

    from trainops.agent.reporting._priority import lower_session

    if not lower_session(pid):
        print("note: the server's autogroup could not be lowered", file=sys.stderr)

    for thread in _tree_threads(pid):
        with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
            os.sched_setscheduler(thread, os.SCHED_IDLE, os.sched_param(0))
            psutil.Process(thread).ionice(psutil.IOPRIO_CLASS_IDLE)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.script:
        return script(args)
    hint = "tracefs is not mounted and writable here (as root: mount -t tracefs nodev /sys/kernel/tracing)"
    if args.attribute == "auto":
        args.attribute = "on" if SchedTrace.available() else "off"
        if args.attribute == "off":
            print(f"note: no attribution columns: {hint}", file=sys.stderr)
    elif args.attribute == "on" and not SchedTrace.available():
        raise SystemExit(f"--attribute on: {hint}")
    from trainops._settings import Settings

    if args.script_cpus:  # this process's children (the script, the uploaders) inherit it
        os.sched_setaffinity(0, set(args.script_cpus))
    workdir = Path(tempfile.mkdtemp(prefix="tcs-", dir="/tmp"))
    args.matrix_sizes = {t: args.matrix_n or _calibrated(args, t, workdir) for t in args.threads}
    bench = Bench(args, workdir)
    server_dir: Path | None = None
    try:
        if "file" in args.schemes:
            remote = workdir / "remote"
            remote.mkdir()
            bench.run_scheme("file", remote.as_uri(), Settings(home=workdir / "home"))
        if "s3" in args.schemes:
            shm = Path("/dev/shm")
            if args.server_disk == "memory" and shm.is_dir():
                server_dir = Path(tempfile.mkdtemp(prefix="tcs-weed-", dir=shm))
            with seaweed(server_dir or workdir / "seaweed") as server:
                bucket = server.create_bucket("ckpt")
                bench.server_pid = server.process.pid
                if args.peer:
                    bench.s5cmd = [tool("s5cmd"), "--endpoint-url", server.endpoint_url]
                    bench.s5cmd_env = {**os.environ, **server.env(), "AWS_REGION": server.region}
                if args.server_priority == "idle":
                    _idle_tree(server.process.pid)
                if args.server_cpus:
                    _pin_tree(server.process.pid, set(args.server_cpus))
                bench.run_scheme("s3", f"s3://{bucket}", server.settings(workdir / "home"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if server_dir is not None:
            shutil.rmtree(server_dir, ignore_errors=True)
    result = build_result(bench, args)
    section = _section(args)
    out = args.out or BENCH / "results" / f"{section}.json"
    publish(result, out, args.readme, section, render_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
