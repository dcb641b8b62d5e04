"""Train the digits CNN from a streamed channel instead of downloaded .npz files.

``--source pipe``: the ``train`` channel is in Pipe mode (``job-pipe.yaml``). Each epoch reads
the channel's next FIFO, ``/opt/ml/input/data/train_<epoch>``, with
``trainops.data.PipeModeDataset``: RecordIO records, one per image (an MXNet ``IRHeader`` with
the label, then 64 float32 pixels), in an object order SageMaker's ShuffleConfig reshuffles
every epoch. Batches are shuffled again in a small window here, as a tf.data or DataLoader
pipeline would.

``--source shards``: the ``train`` channel holds trainops shards (``job-shards.yaml``), read
with ``trainops.data.StreamingDataset``: shuffled per epoch, split by rank and DataLoader
worker, in batches.

Model, optimiser, batch size, epochs and test set are train.py's, so the test accuracy compares
with File mode's. Each epoch prints the same ``epoch=N train_loss=... test_accuracy=...`` line.
"""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from train import build_model, evaluate, load_channel, log_epoch

from trainops.data import PipeModeDataset, StreamingDataset, unpack_irheader

SHUFFLE_WINDOW = 8  # batches


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("pipe", "shards"), required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    env = os.environ.get
    parser.add_argument("--train", default=env("SM_CHANNEL_TRAIN"))
    parser.add_argument("--test", default=env("SM_CHANNEL_TEST"))
    parser.add_argument("--model-dir", default=env("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args(argv)


def decode(records: Iterable[bytes | memoryview]) -> tuple[torch.Tensor, torch.Tensor]:
    """Images (N, 1, 8, 8) and labels (N,) from IRHeader records."""
    labels, pixels = [], []
    for record in records:
        header, data = unpack_irheader(bytes(record))
        labels.append(int(header.label))  # type: ignore[arg-type]  # one label: a float
        pixels.append(data)
    images = np.frombuffer(b"".join(pixels), dtype=np.float32).reshape(-1, 1, 8, 8)
    return torch.from_numpy(images.copy()), torch.tensor(labels, dtype=torch.int64)


def windowed(batches: Iterable[Any], seed: int) -> Iterator[Sequence[bytes]]:
    """Records shuffled across a window of ``SHUFFLE_WINDOW`` batches, re-batched."""
    rng, window = random.Random(seed), []
    for batch in batches:
        window.append(batch)
        if len(window) == SHUFFLE_WINDOW:
            yield from _reshuffled(window, rng)
            window = []
    yield from _reshuffled(window, rng)


def _reshuffled(window: list[Sequence[bytes]], rng: random.Random) -> Iterator[list[bytes]]:
    records = [record for batch in window for record in batch]
    rng.shuffle(records)
    size = len(window[0]) if window else 1
    for start in range(0, len(records), size):
        yield records[start : start + size]


Dataset = PipeModeDataset | StreamingDataset


def epoch_batches(args: argparse.Namespace, source: Dataset, epoch: int) -> Iterator[Any]:
    """One epoch of batches: iterating a dataset again reads its next epoch."""
    if args.source == "pipe":
        return windowed(iter(source), args.seed * 1000 + epoch)
    return iter(source)


def train_epoch(
    model: nn.Module, optimizer: torch.optim.Optimizer, batches: Iterator[Any]
) -> float:
    model.train()
    total, count = 0.0, 0
    for batch in batches:
        images, labels = decode(batch)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(labels)
        count += len(labels)
    return total / max(count, 1)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    test = load_channel(args.test)
    if args.source == "pipe":
        source: Dataset = PipeModeDataset("train", "RecordIO", batch_size=args.batch_size)
    else:
        source = StreamingDataset(args.train, batch_size=args.batch_size, seed=args.seed)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        train_loss = train_epoch(model, optimizer, epoch_batches(args, source, epoch))
        test_loss, accuracy = evaluate(model, test)
        log_epoch(
            {
                "epoch": epoch,
                "train_loss": train_loss,
                "test_loss": test_loss,
                "test_accuracy": accuracy,
            }
        )
    Path(args.model_dir).mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), Path(args.model_dir) / "model.pt")


if __name__ == "__main__":
    main()
