"""Write the scikit-learn digits data as train/test channels of .npz files (no downloads).

The split is deterministic (fixed seed, stratified), so every run writes the same bytes:

    python prepare_data.py            # -> data/train/train-*.npz, data/test/test.npz
    python prepare_data.py --out DIR  # anywhere else

The training set is written as a few shards so that ShardedByKey has objects to spread, and
twice more for the streaming examples, with the same images and labels:

- ``data/train-rec/train-*.rec``: RecordIO, one record per image (an MXNet ``IRHeader`` with
  the label, then the 64 float32 pixels), for the Pipe-mode job (``job-pipe.yaml``);
- ``data/train-shards/``: trainops shards and their ``index.json``, one record per image (the
  same bytes), for the streaming-dataset job (``job-shards.yaml``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

HERE = Path(__file__).resolve().parent
TRAIN_SHARDS = 4


def split(seed: int, test_fraction: float) -> tuple[np.ndarray, ...]:
    """Images as float32 in [0, 1] shaped (N, 1, 8, 8), labels as int64."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    return tuple(
        train_test_split(
            images, labels, test_size=test_fraction, random_state=seed, stratify=labels
        )
    )


def write_npz(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        np.savez(handle, images=images, labels=labels)
    tmp.replace(path)


def image_records(images: np.ndarray, labels: np.ndarray, first_id: int) -> list[bytes]:
    """One RecordIO-style payload per image: IRHeader(label) + float32 pixels."""
    from trainops.data import IRHeader, pack_irheader

    return [
        pack_irheader(IRHeader(0, float(label), first_id + i, 0), image.tobytes())
        for i, (image, label) in enumerate(zip(images, labels, strict=True))
    ]


def write_streams(out: Path, parts: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """The training shards again as RecordIO files and as trainops shards (see above)."""
    from trainops.data import INDEX_NAME, RecordIOWriter, ShardIndex, write_shard

    rec_dir, shard_dir = out / "train-rec", out / "train-shards"
    for folder in (rec_dir, shard_dir):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
    infos, first = [], 0
    for index, (images, labels) in enumerate(parts):
        records = image_records(images, labels, first)
        first += len(records)
        tmp = rec_dir / f".train-{index}.rec.tmp"
        with tmp.open("wb") as handle:
            writer = RecordIOWriter(handle)
            for record in records:
                writer.write(record)
        tmp.replace(rec_dir / f"train-{index}.rec")
        infos.append(write_shard(shard_dir / f"shard-{index:05d}.tops", records))
    index_file = shard_dir / INDEX_NAME
    index_file.with_suffix(".tmp").write_text(ShardIndex(tuple(infos)).to_json())
    index_file.with_suffix(".tmp").replace(index_file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test-fraction", type=float, default=0.2)
    args = parser.parse_args()
    x_train, x_test, y_train, y_test = split(args.seed, args.test_fraction)
    for old in (args.out / "train").glob("*.npz"):
        old.unlink()
    parts = []
    for index, rows in enumerate(np.array_split(np.arange(len(y_train)), TRAIN_SHARDS)):
        write_npz(args.out / "train" / f"train-{index}.npz", x_train[rows], y_train[rows])
        parts.append((x_train[rows], y_train[rows]))
    write_npz(args.out / "test" / "test.npz", x_test, y_test)
    write_streams(args.out, parts)
    print(f"wrote {len(y_train)} training and {len(y_test)} test images under {args.out}")


if __name__ == "__main__":
    main()
