"""A plain PyTorch training loop for the profiling example: nothing in it knows about trainops.

It trains a small CNN on the digits data (the channels ``train`` and ``test`` of the digits
example) with a ``DataLoader``, and has three knobs that make a run unhealthy on purpose:

- ``--workers N``: DataLoader worker processes (more than the machine has cores is waste);
- ``--batch-size B``: a tiny batch makes every step mostly Python overhead;
- ``--slow-every K --slow-ms M``: every K-th step takes M ms longer (a straggler: a sync, a
  garbage collection, a log flush).

``--item-cost-us`` adds CPU work per sample in the workers (a stand-in for decoding). Each
epoch prints ``epoch=N train_loss=... test_accuracy=...`` for the job's metric definitions.
trainops times every step without a code change (it hooks the optimizer, the DataLoader and the
outermost module); the same script runs on SageMaker or by hand.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slow-every", type=int, default=0)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    parser.add_argument("--item-cost-us", type=float, default=0.0)
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN"))
    parser.add_argument("--test", default=os.environ.get("SM_CHANNEL_TEST"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    args = parser.parse_args()
    if not args.train or not args.test:
        parser.error("no data: pass --train and --test or set SM_CHANNEL_TRAIN and SM_CHANNEL_TEST")
    return args


class Digits(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Every .npz of a channel directory; ``cost_us`` of busy work per item."""

    def __init__(self, directory: str, cost_us: float) -> None:
        images, labels = [], []
        for path in sorted(Path(directory).rglob("*.npz")):
            with np.load(path) as data:
                images.append(data["images"])
                labels.append(data["labels"])
        if not images:
            raise SystemExit(f"no .npz files in {directory}")
        self.images = torch.from_numpy(np.concatenate(images))
        self.labels = torch.from_numpy(np.concatenate(labels))
        self.cost_s = cost_us / 1e6

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cost_s:
            until = time.perf_counter() + self.cost_s
            while time.perf_counter() < until:
                pass
        return self.images[index], self.labels[index]


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def train_epoch(
    model: nn.Module,
    loader: DataLoader,
    optimizer: torch.optim.Optimizer,
    args: argparse.Namespace,
    first_step: int,
) -> tuple[float, int]:
    model.train()
    total, count, step = 0.0, 0, first_step
    for images, labels in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        step += 1
        if args.slow_every and step % args.slow_every == 0:
            time.sleep(args.slow_ms / 1000)  # the straggler
        optimizer.step()
        total, count = total + loss.item() * len(labels), count + len(labels)
    return total / max(count, 1), step


@torch.no_grad()
def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    right = seen = 0
    for images, labels in loader:
        right += int((model(images).argmax(dim=1) == labels).sum())
        seen += len(labels)
    return right / max(seen, 1)


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    train = DataLoader(
        Digits(args.train, args.item_cost_us),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
    )
    test = DataLoader(Digits(args.test, 0.0), batch_size=256)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    step = 0
    for epoch in range(1, args.epochs + 1):
        loss, step = train_epoch(model, train, optimizer, args, step)
        accuracy = evaluate(model, test)
        print(
            f"epoch={epoch} step={step} train_loss={loss:.4f} test_accuracy={accuracy:.4f}",
            flush=True,
        )
    Path(args.model_dir).mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), Path(args.model_dir) / "model.pt")


if __name__ == "__main__":
    main()
