"""A plain PyTorch loop for the debugger example: nothing in it knows about trainops.

It trains a small fully connected network on the digits data (the channels ``train`` and
``test`` of the digits example) and has two knobs that break it on purpose:

- ``--init normal``: every weight drawn from N(0, 1), whatever the layer's width, instead of
  He's initialization (``--init he``, the default): each layer multiplies the variance of its
  output by about half its fan-in;
- ``--lr``: the SGD learning rate; too large, the first steps make the loss explode, and the
  huge updates push the ReLUs' inputs below 0 for every sample: the ReLUs die, no gradient
  gets through them, and the network is stuck at chance.

The model, the loss (an ``nn.CrossEntropyLoss`` module) and the optimizer are plain PyTorch, so
the job's debugger hook config saves their tensors with no code change: trainops' bootstrap
finds the model and the loss when they are first called, and tells TRAIN from EVAL by the
model's ``training`` flag. Each epoch prints ``epoch=N train_loss=... test_loss=...
test_accuracy=...`` for the job's metric definitions.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--init", choices=["he", "normal"], default="he")
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN"))
    parser.add_argument("--test", default=os.environ.get("SM_CHANNEL_TEST"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    args = parser.parse_args()
    if not args.train or not args.test:
        parser.error("no data: pass --train and --test or set SM_CHANNEL_TRAIN and SM_CHANNEL_TEST")
    return args


def load(directory: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Every .npz of a channel directory: images (N, 64) and labels (N,)."""
    images, labels = [], []
    for path in sorted(Path(directory).rglob("*.npz")):
        with np.load(path) as data:
            images.append(data["images"].reshape(len(data["images"]), -1))
            labels.append(data["labels"])
    if not images:
        raise SystemExit(f"no .npz files in {directory}")
    return torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels))


class Net(nn.Module):
    """64 pixels -> 256 -> 128 -> 10 classes, a ReLU after each hidden layer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.relu1 = nn.Linear(64, 256), nn.ReLU()
        self.fc2, self.relu2 = nn.Linear(256, 128), nn.ReLU()
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(x)))))
        return out


def initialize(model: Net, init: str) -> None:
    for layer in (model.fc1, model.fc2, model.fc3):
        if init == "normal":
            nn.init.normal_(layer.weight, std=1.0)
        else:
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
        nn.init.zeros_(layer.bias)


def train_epoch(
    model: Net,
    data: tuple[torch.Tensor, torch.Tensor],
    args: argparse.Namespace,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
) -> float:
    model.train()
    images, labels = data
    order = torch.randperm(len(labels))
    total = 0.0
    for start in range(0, len(order), args.batch_size):
        batch = order[start : start + args.batch_size]
        optimizer.zero_grad()
        loss = criterion(model(images[batch]), labels[batch])
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
    return total / len(order)


@torch.no_grad()
def evaluate(
    model: Net, data: tuple[torch.Tensor, torch.Tensor], criterion: nn.Module
) -> tuple[float, float]:
    """The loss and accuracy on the whole test set: one EVAL step."""
    model.eval()
    images, labels = data
    scores = model(images)
    loss = criterion(scores, labels)
    return loss.item(), float((scores.argmax(dim=1) == labels).float().mean())


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    train, test = load(args.train), load(args.test)
    model = Net()
    initialize(model, args.init)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(1, args.epochs + 1):
        train_loss = train_epoch(model, train, args, criterion, optimizer)
        test_loss, accuracy = evaluate(model, test, criterion)
        print(
            f"epoch={epoch} train_loss={train_loss:.4f} test_loss={test_loss:.4f} "
            f"test_accuracy={accuracy:.4f}",
            flush=True,
        )
    Path(args.model_dir).mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), Path(args.model_dir) / "model.pt")


if __name__ == "__main__":
    main()
