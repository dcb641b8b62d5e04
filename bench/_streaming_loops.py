"""The per-system sides of bench/streaming.py: write a dataset, or read one epoch of it.

Run by bench/streaming.py in a child process, with the interpreter that has the system: the
project's venv for trainops, ``.venv-bench`` for the peers (MosaicML streaming pins numpy<2.2).
Imports only what the named system needs.

    python _streaming_loops.py write SYSTEM DIR RECORDS PER_SHARD
    python _streaming_loops.py read SYSTEM DIR --batch 256 --workers 2 --seed 7 [--ids FILE]

Every dataset holds the same records: record ``i`` is ``i`` as a little-endian u64 followed by
4088 bytes cut from one fixed random MiB (incompressible within a record). ``read`` prints one
JSON line: seconds to the first batch (from before the dataset is constructed), the time of
every batch, the samples read and their payload bytes; with ``--ids`` it writes the ids of the
samples in the order the loop saw them. The loop touches every sample (its length), the same
for every system.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import sys
import time
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# This script's folder holds bench/streaming.py, which would shadow MosaicML's `streaming`.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

RECORD = 4096
_BLOCK = random.Random(20261122).randbytes(1 << 20)


def record(i: int) -> bytes:
    at = (i * 7919) % (len(_BLOCK) - RECORD)
    return i.to_bytes(8, "little") + _BLOCK[at : at + RECORD - 8]


def identity(batch: Any) -> Any:
    return batch


def as_bytes(batch: list[Any]) -> list[bytes]:
    return [bytes(item) for item in batch]


# --- writers ------------------------------------------------------------------------------


def write_trainops(out: Path, n: int, per: int) -> None:
    from trainops.data import ShardIndex, write_shard

    infos = []
    for k, lo in enumerate(range(0, n, per)):
        records = [record(i) for i in range(lo, min(lo + per, n))]
        infos.append(write_shard(out / f"part-{k:05d}.tops", records))
    (out / "index.json").write_text(ShardIndex(tuple(infos)).to_json())


def write_files(out: Path, n: int, per: int) -> None:
    for i in range(n):
        (out / f"{i:08d}.bin").write_bytes(record(i))


def write_mosaicml(out: Path, n: int, per: int) -> None:
    from streaming import MDSWriter

    # size_limit in bytes: per samples of 4096 bytes plus MDS's 4-byte offset each.
    with MDSWriter(out=str(out), columns={"x": "bytes"}, size_limit=per * (RECORD + 4)) as w:
        for i in range(n):
            w.write({"x": record(i)})


def write_litdata(out: Path, n: int, per: int) -> None:
    from litdata.streaming.writer import BinaryWriter

    writer = BinaryWriter(str(out), chunk_size=per)
    for i in range(n):
        writer[i] = record(i)
    writer.done()
    writer.merge()


def write_webdataset(out: Path, n: int, per: int) -> None:
    import webdataset as wds

    with wds.ShardWriter(str(out / "shard-%05d.tar"), maxcount=per, verbose=0) as sink:
        for i in range(n):
            sink.write({"__key__": f"{i:08d}", "bin": record(i)})


WRITERS: dict[str, Callable[[Path, int, int], None]] = {
    "trainops": write_trainops,
    "trainops_records": write_trainops,
    "files": write_files,
    "mosaicml": write_mosaicml,
    "litdata": write_litdata,
    "webdataset": write_webdataset,
}


# --- readers: each returns (iterable of batches, payload of one sample) --------------------

Loop = tuple[Iterable[Any], Callable[[Any], Any]]


def read_trainops(root: Path, a: argparse.Namespace) -> Loop:
    from trainops.data import StreamingDataset

    dataset = StreamingDataset(root, batch_size=a.batch, seed=a.seed)
    return dataset.loader(num_workers=a.workers), identity


def read_trainops_records(root: Path, a: argparse.Namespace) -> Loop:
    # One record per item, batched by the DataLoader: what crossing per sample costs.
    from torch.utils.data import DataLoader

    from trainops.data import StreamingDataset

    dataset: Any = StreamingDataset(root, seed=a.seed)
    loader = DataLoader(dataset, batch_size=a.batch, num_workers=a.workers, collate_fn=identity)
    return loader, identity


class _Files:
    def __init__(self, root: Path) -> None:
        self.paths = [str(root / name) for name in sorted(os.listdir(root))]

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> bytes:
        with open(self.paths[i], "rb") as handle:
            return handle.read()


def read_files(root: Path, a: argparse.Namespace) -> Loop:
    import torch
    from torch.utils.data import DataLoader

    generator = torch.Generator().manual_seed(a.seed)
    files: Any = _Files(root)
    loader = DataLoader(
        files, batch_size=a.batch, shuffle=True, num_workers=a.workers,
        collate_fn=identity, generator=generator,
    )  # fmt: skip
    return loader, identity


def read_mosaicml(root: Path, a: argparse.Namespace) -> Loop:
    from streaming import StreamingDataLoader, StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    dataset = StreamingDataset(
        local=str(root), shuffle=True, shuffle_algo="py1e", shuffle_seed=a.seed,
        batch_size=a.batch,
    )  # fmt: skip
    loader = StreamingDataLoader(
        dataset, batch_size=a.batch, num_workers=a.workers, collate_fn=identity
    )
    return loader, lambda sample: sample["x"]


def read_litdata(root: Path, a: argparse.Namespace) -> Loop:
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(str(root), shuffle=True, seed=a.seed)
    # Payloads must become bytes inside the workers, or pickling them hangs (streaming.md §12.4).
    loader = StreamingDataLoader(
        dataset, batch_size=a.batch, num_workers=a.workers, collate_fn=as_bytes
    )
    return loader, identity


def _payload(sample: dict[str, Any]) -> bytes:
    data: bytes = sample["bin"]
    return data


def read_webdataset(root: Path, a: argparse.Namespace) -> Loop:
    import webdataset as wds

    urls = sorted(str(p) for p in root.glob("shard-*.tar"))
    dataset = (
        wds.WebDataset(urls, shardshuffle=len(urls), seed=a.seed, empty_check=False)
        .shuffle(1000, seed=a.seed)
        .map(_payload)
        .batched(a.batch, collation_fn=list, partial=True)
    )
    return wds.WebLoader(dataset, batch_size=None, num_workers=a.workers), identity


READERS: dict[str, Callable[[Path, argparse.Namespace], Loop]] = {
    "trainops": read_trainops,
    "trainops_records": read_trainops_records,
    "files": read_files,
    "mosaicml": read_mosaicml,
    "litdata": read_litdata,
    "webdataset": read_webdataset,
}


# Imported before the clock starts: time to first batch counts from the dataset's constructor.
PRELOAD = {
    "trainops": (
        "torch.utils.data",
        "trainops.data.streaming._dataset",
        "trainops.data.streaming._loader",
    ),
    "trainops_records": ("torch.utils.data", "trainops.data.streaming._dataset"),
    "files": ("torch.utils.data",),
    "mosaicml": ("torch.utils.data", "streaming"),
    "litdata": ("torch.utils.data", "litdata"),
    "webdataset": ("torch.utils.data", "webdataset"),
}


def epoch(root: Path, a: argparse.Namespace) -> dict[str, Any]:
    for module in PRELOAD[a.system]:
        importlib.import_module(module)
    ids = array("Q")
    start = time.perf_counter()
    batches, payload = READERS[a.system](root, a)
    times: list[float] = []
    samples = size = 0
    for batch in batches:
        for sample in batch:
            data = payload(sample)
            size += len(data)
            if a.ids:
                ids.append(int.from_bytes(data[:8], "little"))
        samples += len(batch)
        times.append(time.perf_counter() - start)
    if a.ids:
        Path(a.ids).write_bytes(ids.tobytes())
    return {"ttfb_s": times[0], "batch_times_s": times, "samples": samples, "bytes": size}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=("write", "read"))
    parser.add_argument("system", choices=sorted(READERS))
    parser.add_argument("root", type=Path)
    parser.add_argument("records", type=int, nargs="?", default=0)
    parser.add_argument("per_shard", type=int, nargs="?", default=0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ids", default="")
    a = parser.parse_args(argv)
    if a.action == "write":
        a.root.mkdir(parents=True, exist_ok=True)
        WRITERS[a.system](a.root, a.records, a.per_shard)
        return 0
    print(json.dumps(epoch(a.root, a)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
