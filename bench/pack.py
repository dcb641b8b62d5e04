"""Packing many small files, and reading records back: trainops next to the plain loops.

Part 1, packing (issue 9): 200,000 files of 4 KiB (streaming.md §12.3 A, random bytes, in 100
class folders, page cache warm) packed into RecordIO by

- ``trainops pack SRC DEST --format recordio`` with 2 workers (one per core) and with 1,
- an im2rec-style plain Python loop (bench/_im2rec_loop.py: read a file, write a record),

each a fresh process, in rotating order per round (A, B, C, then B, C, A, ...), with ``sync``
before every run so no run pays for writing back the previous one's files, and trainops'
bytecode compiled beforehand, as an installed package's is (with PYTHONDONTWRITEBYTECODE set
and no ``__pycache__``, every trainops process would compile its two dozen modules, the loop
one small file). trainops also checksums every shard and fsyncs it; the loop does neither.
Figure: files/s and MB/s, and trainops' rate over the loop's, median over rounds.

Part 2, parsing (streaming.md §12.2 item 7): one packed RecordIO shard set and the same records
as TFRecord and as trainops shards, read by each reader, against a bare ``f.read(4096)`` loop
over the same RecordIO files (the per-record interpreter ceiling), interleaved the same way, in
this process with the files in the page cache. Figure: records/s, MB/s of payload, and each
reader's rate over the bare loop's.

    python bench/pack.py [--files 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _storage_bench import BENCH, header, publish, run_child

from trainops.data import RecordIOReader, ShardReader, TFRecordReader

SECTION = "pack"
FILE_SIZE = 4096
CLASSES = 100
PACKERS = {
    "trainops_w2": "`trainops pack --format recordio --workers 2`",
    "trainops_w1": "`trainops pack --format recordio --workers 1`",
    "im2rec_loop": "im2rec-style plain loop, 1 process",
    "im2rec_loop_fsync": "the same loop, its output fsynced at the end",
    "write_fsync": "limit: writing the same bytes from memory + fsync",
}
_WRITE_FSYNC = (
    "import os, sys\n"
    "chunk, total = bytes(4 << 20), int(sys.argv[2])\n"
    "with open(sys.argv[1], 'wb') as f:\n"
    "    for _ in range(0, total, len(chunk)):\n"
    "        f.write(chunk)\n"
    "    f.flush()\n"
    "    os.fsync(f.fileno())\n"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200_000, help="small files (default 200000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    return parser.parse_args(argv)


def make_source(root: Path, files: int) -> None:
    rng = random.Random(12)
    for number in range(files):
        folder = root / f"class-{number % CLASSES:03d}"
        if number < CLASSES:
            folder.mkdir(parents=True)
        (folder / f"{number:07d}.bin").write_bytes(rng.randbytes(FILE_SIZE))


def warm(root: Path) -> None:
    subprocess.run(["tar", "-cf", "/dev/null", "."], cwd=root, check=True)


def packer_argv(name: str, src: Path, out: Path, files: int) -> list[str]:
    if name.startswith("im2rec_loop"):
        out.mkdir()
        durable = ["--fsync"] if name.endswith("fsync") else []
        return [
            sys.executable,
            str(BENCH / "_im2rec_loop.py"),
            str(src),
            str(out / "data"),
            *durable,
        ]
    if name == "write_fsync":
        out.mkdir()
        size = files * (FILE_SIZE + 32)  # the .rec's size: each file + IRHeader + framing
        return [sys.executable, "-c", _WRITE_FSYNC, str(out / "data"), str(size)]
    workers = name.removeprefix("trainops_w")
    return [sys.executable, "-m", "trainops.cli", "pack", str(src), str(out),
            "--format", "recordio", "--workers", workers]  # fmt: skip


def measure_packers(
    src: Path, work: Path, rounds: int, files: int, env: dict[str, str]
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in PACKERS}
    names = list(PACKERS)
    for round_number in range(rounds):
        order = names[round_number % len(names) :] + names[: round_number % len(names)]
        for name in order:
            out = work / f"out-{name}"
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run(["sync"], check=True)
            child = run_child(packer_argv(name, src, out, files), env)
            samples[name].append(child.wall_s)
            print(f"round {round_number}: {name} {child.wall_s:.2f} s", flush=True)
    return samples


def bare_read(paths: list[Path]) -> int:
    count = 0
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(FILE_SIZE):
                count += 1
    return count


def read_with(reader: Callable[[Any], Any]) -> Callable[[list[Path]], int]:
    def run(paths: list[Path]) -> int:
        count = 0
        for path in paths:
            with open(path, "rb") as handle:
                for _ in reader(handle):
                    count += 1
        return count

    return run


def read_shards(paths: list[Path]) -> int:
    count = 0
    for path in paths:
        with ShardReader.open(path) as shard:
            for _ in shard:
                count += 1
    return count


READERS: dict[str, tuple[str, str, Callable[[list[Path]], int]]] = {
    "bare_read": ("bare `f.read(4096)` loop", "rec", bare_read),
    "recordio": ("`RecordIOReader`", "rec", read_with(RecordIOReader)),
    "tfrecord_all": ("`TFRecordReader`, verify all", "tfrecord", read_with(TFRecordReader)),
    "tfrecord_length": (
        "`TFRecordReader`, verify length",
        "tfrecord",
        read_with(lambda h: TFRecordReader(h, verify="length")),
    ),
    "tfrecord_none": (
        "`TFRecordReader`, verify none",
        "tfrecord",
        read_with(lambda h: TFRecordReader(h, verify="none")),
    ),
    "shards": ("`ShardReader` (mmap)", "tops", read_shards),
}


def write_formats(src: Path, work: Path, env: dict[str, str]) -> dict[str, list[Path]]:
    """The same files packed in each format (64 MiB shards), for the parse benchmark."""
    found = {"rec": sorted((work / "out-trainops_w2").glob("*.rec"))}
    for fmt, ext in (("tfrecord", "tfrecord"), ("shards", "tops")):
        out = work / f"parse-{fmt}"
        shutil.rmtree(out, ignore_errors=True)
        run_child([sys.executable, "-m", "trainops.cli", "pack", str(src), str(out),
                   "--format", fmt, "--workers", "2"], env)  # fmt: skip
        found[ext] = sorted(out.glob(f"*.{ext}"))
    for paths in found.values():
        for path in paths:
            path.read_bytes()  # into the page cache
    return found


def measure_readers(
    files: dict[str, list[Path]], rounds: int, expected: int
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in READERS}
    names = list(READERS)
    for round_number in range(rounds):
        order = names[round_number % len(names) :] + names[: round_number % len(names)]
        for name in order:
            _, ext, run = READERS[name]
            start = time.perf_counter()
            count = run(files[ext])
            samples[name].append(time.perf_counter() - start)
            if name != "bare_read" and count != expected:
                raise SystemExit(f"{name} read {count} records, expected {expected}")
    return samples


def summarize(
    samples: dict[str, list[float]], count: int, payload: int
) -> dict[str, dict[str, float]]:
    out = {}
    for name, times in samples.items():
        median = statistics.median(times)
        out[name] = {"median_s": median, "per_s": count / median, "mb_s": payload / median / 1e6}
    return out


def _row(label: str, row: dict[str, float], *peers: float) -> str:
    ratios = " | ".join(f"{row['per_s'] / peer:.2f}" for peer in peers)
    return (
        f"| {label} | {row['per_s']:,.0f} | {row['mb_s']:.0f} | {row['median_s']:.2f} | {ratios} |"
    )


def render(result: dict[str, Any]) -> str:
    pack, parse = result["pack"], result["parse"]
    loop, durable = pack["im2rec_loop"]["per_s"], pack["im2rec_loop_fsync"]["per_s"]
    rows = [
        "| packing 4 KiB files into RecordIO | files/s | MB/s | median (s) "
        "| rate / loop's | rate / loop + fsync's |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows += [_row(label, pack[name], loop, durable) for name, label in PACKERS.items()]
    bare = parse["bare_read"]["per_s"]
    rows += [
        "",
        "| reading the same records | records/s | MB/s | median (s) | rate / bare read's |",
        "|---|---:|---:|---:|---:|",
    ]
    rows += [_row(label, parse[name], bare) for name, (label, _, _) in READERS.items()]
    m = result["machine"]
    rows.append("")
    rows.append(
        f"Measured {result['date']} on {m['cpu_model']}, {m['usable_cores']} usable cores, "
        f"{m['memory_gib']} GiB; {result['args']['files']:,} files of {FILE_SIZE} bytes in "
        f"{CLASSES} folders, page cache warm; median of {result['args']['rounds']} interleaved "
        f"rounds; load average {result.get('load_average', 'not recorded')} at the end (other "
        "work on the machine slows every path alike). "
        "Raw samples: [results/pack.json](results/pack.json)."
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    env = {**os.environ, "PYTHONPATH": f"{BENCH.parent / 'src'}"}
    compileall.compile_dir(BENCH.parent / "src", quiet=1)  # see the module docstring
    work = Path(tempfile.mkdtemp(prefix="bench-pack-", dir=args.workdir))
    try:
        src = work / "src"
        print(f"writing {args.files} files under {src}", flush=True)
        make_source(src, args.files)
        warm(src)
        pack_samples = measure_packers(src, work, args.rounds, args.files, env)
        formats = write_formats(src, work, env)
        parse_samples = measure_readers(formats, args.rounds, args.files)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    payload = args.files * FILE_SIZE
    result = header("pack", vars(args) | {"workdir": str(args.workdir)})
    result |= {
        "pack_samples_s": pack_samples,
        "parse_samples_s": parse_samples,
        "pack": summarize(pack_samples, args.files, payload),
        "load_average": round(os.getloadavg()[0], 2),
        "parse": summarize(parse_samples, args.files, payload),
    }
    publish(result, BENCH / "results" / "pack.json", BENCH / "README.md", SECTION, render(result))


if __name__ == "__main__":
    main()
