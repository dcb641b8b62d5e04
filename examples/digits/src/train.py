"""Train a small CNN on the 8x8 digits data: a SageMaker PyTorch training script, unchanged.

Every directory defaults to the SM_* variable SageMaker (and trainops) sets, so the same file runs
on SageMaker, under ``trainops run job.yaml``, or by hand:

    SM_CHANNEL_TRAIN=data/train SM_CHANNEL_TEST=data/test SM_MODEL_DIR=/tmp/model \
    SM_OUTPUT_DATA_DIR=/tmp/out SM_CHECKPOINT_DIR=/tmp/ckpt python train.py --epochs 3

Each epoch prints ``epoch=N train_loss=... test_loss=... test_accuracy=...`` (the job's metric
definitions match these) and saves ``checkpoint-epoch-N.pt`` to the checkpoint directory, keeping
the last two. A run that finds checkpoints there resumes from the newest readable one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

# The optimizers --optimizer chooses from (a tuning job's categorical range: tune.yaml).
OPTIMIZERS: dict[str, Any] = {
    "adam": torch.optim.Adam,
    "rmsprop": torch.optim.RMSprop,
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
}
CHECKPOINT = re.compile(r"^checkpoint-epoch-(\d+)\.pt$")
KEEP_CHECKPOINTS = 2


def build_parser(description: str) -> argparse.ArgumentParser:
    """The script's arguments: hyperparameters, then the SageMaker contract's folders."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adam")
    parser.add_argument("--seed", type=int, default=0)
    env = os.environ.get
    parser.add_argument("--model-dir", default=env("SM_MODEL_DIR", "/opt/ml/model"))
    parser.add_argument("--train", default=env("SM_CHANNEL_TRAIN"))
    parser.add_argument("--test", default=env("SM_CHANNEL_TEST"))
    parser.add_argument(
        "--output-data-dir", default=env("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data")
    )
    # SageMaker itself does not set SM_CHECKPOINT_DIR (trainops does); its default local path is
    # /opt/ml/checkpoints, so the fallback keeps the script working there too.
    parser.add_argument("--checkpoint-dir", default=env("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints"))
    return parser


def checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """``args``, once both data channels are known (else the parser's usage error)."""
    for channel in ("train", "test"):
        if not getattr(args, channel):
            parser.error(f"no {channel} data: pass --{channel} or set SM_CHANNEL_{channel.upper()}")
    return args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser("Train a CNN on the scikit-learn digits data.")
    return checked(parser, parser.parse_args(argv))


def load_channel(directory: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate every .npz file of a channel directory, in name order."""
    files = sorted(Path(directory).rglob("*.npz"))
    if not files:
        raise SystemExit(f"no .npz files in channel directory {directory}")
    images, labels = [], []
    for path in files:
        with np.load(path) as data:
            images.append(data["images"])
            labels.append(data["labels"])
    return torch.from_numpy(np.concatenate(images)), torch.from_numpy(np.concatenate(labels))


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: tuple[torch.Tensor, torch.Tensor],
    batch_size: int,
    order_seed: int,
) -> float:
    """One pass in an order fixed by ``order_seed``, so a resumed run sees the same batches."""
    images, labels = data
    model.train()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(order_seed))
    total = 0.0
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images[batch]), labels[batch])
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
    return total / len(labels)


@torch.no_grad()
def evaluate(model: nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, float]:
    images, labels = data
    model.eval()
    logits = model(images)
    loss = nn.functional.cross_entropy(logits, labels).item()
    accuracy = (logits.argmax(dim=1) == labels).float().mean().item()
    return loss, accuracy


def checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """``(epoch, path)`` of every checkpoint in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    found = [(CHECKPOINT.match(p.name), p) for p in directory.iterdir()]
    return sorted((int(m.group(1)), p) for m, p in found if m)


def restore(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Load the newest readable checkpoint; returns its state (``epoch`` 0 when none)."""
    for epoch, path in reversed(checkpoints(directory)):
        try:
            state: dict[str, Any] = torch.load(path, weights_only=True)
        except Exception as exc:  # a partial copy must not stop training: try an older one
            reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            print(f"skipping unreadable checkpoint {path.name}: {reason}", flush=True)
            continue
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        print(f"resumed from epoch {epoch}", flush=True)
        return state
    return {"epoch": 0, "history": []}


def save_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    """Write under a temporary name and rename, so no reader ever sees a torn checkpoint."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"checkpoint-epoch-{state['epoch']}.pt"
    tmp = directory / f".{final.name}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, final)
    for _epoch, old in checkpoints(directory)[:-KEEP_CHECKPOINTS]:
        old.unlink(missing_ok=True)


def save_results(
    args: argparse.Namespace, model: nn.Module, history: list[dict[str, float]]
) -> None:
    model_dir, output_dir = Path(args.model_dir), Path(args.output_data_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), model_dir / "model.pt")
    final = history[-1] if history else {}
    (model_dir / "metrics.json").write_text(json.dumps(final, indent=2) + "\n")
    lines = ["epoch,train_loss,test_loss,test_accuracy"]
    lines += [
        f"{int(h['epoch'])},{h['train_loss']},{h['test_loss']},{h['test_accuracy']}"
        for h in history
    ]
    (output_dir / "history.csv").write_text("\n".join(lines) + "\n")


def log_epoch(row: dict[str, float]) -> None:
    """The line the job's metric definitions match."""
    print(
        f"epoch={int(row['epoch'])} train_loss={row['train_loss']:.4f} "
        f"test_loss={row['test_loss']:.4f} test_accuracy={row['test_accuracy']:.4f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    train, test = load_channel(args.train), load_channel(args.test)
    print(f"train={len(train[1])} test={len(test[1])} images", flush=True)
    model = build_model()
    optimizer = OPTIMIZERS[args.optimizer](model.parameters(), lr=args.lr)
    checkpoint_dir = Path(args.checkpoint_dir)
    state = restore(checkpoint_dir, model, optimizer)
    history: list[dict[str, float]] = list(state["history"])
    first = int(state["epoch"]) + 1
    for epoch in range(first, args.epochs + 1):
        train_loss = train_epoch(model, optimizer, train, args.batch_size, args.seed * 1000 + epoch)
        test_loss, accuracy = evaluate(model, test)
        history.append(
            {
                "epoch": epoch,
                "train_loss": train_loss,
                "test_loss": test_loss,
                "test_accuracy": accuracy,
            }
        )
        log_epoch(history[-1])
        weights = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        save_checkpoint(checkpoint_dir, {"epoch": epoch, **weights, "history": history})
    if history and first > args.epochs:
        # Nothing left to train: report the restored figures so this job has final metrics too.
        log_epoch(history[-1])
    save_results(args, model, history)
    print(f"saved model to {args.model_dir}", flush=True)


if __name__ == "__main__":
    main()
