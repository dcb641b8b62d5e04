"""Archive extraction: trainops' checked, link-free extractor next to ``tarfile``'s own.

Both extract the same source-like tarball (``--files`` files of mixed sizes in nested
directories, a few symbolic links) into fresh directories, interleaved (trainops, tarfile,
trainops, tarfile …) after one warm-up each:

- trainops: ``trainops.archive.safe_extract`` (header checks and link resolution first, then
            ``openat``/``O_NOFOLLOW`` creation, expansion caps)
- tarfile:  ``TarFile.extractall(filter="data")``, the standard library's safe mode (the peer)

A second figure is the time to refuse a 3 MB gzip bomb of 30 x 100 MB files (decompressed up
to the ratio cap, about 600 MB, before it is refused). Results go to
bench/results/archive_extract.json.

    python bench/archive_extract.py [--runs 7] [--files 3000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import io
import json
import random
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _report import machine, versions

from trainops import ArchiveError
from trainops.archive import ArchiveLimits, safe_extract

BENCH = Path(__file__).resolve().parent
MIB = 1024 * 1024
TARGET_RATIO = 1.5  # trainops may take at most this many times tarfile's time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per path (default 7)")
    parser.add_argument("--files", type=int, default=3000, help="files in the archive")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "archive_extract.json")
    return parser.parse_args(argv)


def build_source_archive(path: Path, files: int) -> tuple[int, int]:
    """A tar.gz shaped like a source tree; returns (entries, uncompressed bytes)."""
    total = 0
    rng = random.Random(7)
    words = [f"{rng.choice(TOKENS)}_{rng.randrange(500)}" for _ in range(4000)]
    with tarfile.open(path, "w:gz", compresslevel=6) as tar:
        for i in range(files):
            size = (i * 7919) % (64 * 1024) + 200  # 200 B .. 64 KiB, code-like text
            data = _text(rng, words, size)
            info = tarfile.TarInfo(f"pkg/sub{i % 40:02d}/deep{i % 7}/mod_{i:05d}.py")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
            total += len(data)
        for i in range(20):
            info = tarfile.TarInfo(f"links/l{i}")
            info.type, info.linkname = tarfile.SYMTYPE, f"../pkg/sub{i:02d}"
            tar.addfile(info)
    return files + 20, total


TOKENS = ["def", "self", "return", "import", "value", "model", "tensor", "batch", "loss", "x"]


def _text(rng: random.Random, words: list[str], size: int) -> bytes:
    lines, length = [], 0
    while length < size:
        line = "    " * rng.randrange(4) + " ".join(rng.choices(words, k=rng.randrange(2, 10)))
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines).encode()


def extract_trainops(archive: Path, target: Path) -> None:
    safe_extract(archive, target)


def extract_tarfile(archive: Path, target: Path) -> None:
    target.mkdir(parents=True)
    with tarfile.open(archive, "r:*") as tar:
        tar.extractall(target, filter="data")


def timed(action: Callable[[Path, Path], None], archive: Path, work: Path) -> float:
    target = work / "t"
    start = time.perf_counter()
    action(archive, target)
    elapsed = time.perf_counter() - start
    shutil.rmtree(target)
    return elapsed


def gzip_bomb(path: Path, members: int, member_bytes: int) -> None:
    zeros = gzip.compress(b"\0" * MIB, compresslevel=9)
    with path.open("wb") as out:
        for i in range(members):
            info = tarfile.TarInfo(f"part-{i:02d}.bin")
            info.size = member_bytes
            out.write(gzip.compress(info.tobuf()))
            out.write(zeros * (member_bytes // MIB))
        out.write(gzip.compress(b"\0" * 1024))


def time_bomb_refusal(work: Path) -> dict[str, float]:
    bomb = work / "bomb.tar.gz"
    gzip_bomb(bomb, 30, 100 * MIB)
    start = time.perf_counter()
    try:
        safe_extract(bomb, work / "bomb-target")
    except ArchiveError:
        pass
    else:
        raise SystemExit("the bomb was extracted: the benchmark's premise is broken")
    elapsed = time.perf_counter() - start
    return {
        "archive_bytes": bomb.stat().st_size,
        "cap_bytes": ArchiveLimits().expansion_cap(bomb.stat().st_size),
        "refusal_s": elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    samples: dict[str, list[float]] = {"trainops": [], "tarfile": []}
    paths = {"trainops": extract_trainops, "tarfile": extract_tarfile}
    with tempfile.TemporaryDirectory(prefix="trainops-bench-") as tmp:
        work = Path(tmp)
        archive = work / "src.tar.gz"
        entries, total = build_source_archive(archive, args.files)
        packed = archive.stat().st_size
        for action in paths.values():  # warm-up
            timed(action, archive, work)
        for _ in range(args.runs):
            for name, action in paths.items():
                samples[name].append(timed(action, archive, work))
        bomb = time_bomb_refusal(work)
    medians = {name: statistics.median(times) for name, times in samples.items()}
    ratio = medians["trainops"] / medians["tarfile"]
    result = {
        "benchmark": "archive_extract",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": args.runs,
        "archive": {"entries": entries, "uncompressed_bytes": total, "compressed_bytes": packed},
        "machine": machine(),
        "versions": versions(),
        "samples_s": samples,
        "median_s": medians,
        "ratio_trainops_to_tarfile": ratio,
        "target_ratio": TARGET_RATIO,
        "bomb": bomb,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"archive: {entries} entries, {total / MIB:.1f} MiB uncompressed; {args.runs} runs each")
    print(f"{'path':<10} {'median s':>9} {'min s':>8} {'max s':>8}")
    for name, times in samples.items():
        print(f"{name:<10} {medians[name]:>9.3f} {min(times):>8.3f} {max(times):>8.3f}")
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    print(f"trainops / tarfile = {ratio:.2f} ({verdict} the {TARGET_RATIO}x target)")
    print(
        f"gzip bomb: {bomb['archive_bytes'] / MIB:.1f} MiB archive refused in "
        f"{bomb['refusal_s']:.2f} s (cap {bomb['cap_bytes'] / MIB:.0f} MiB)"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
