"""The digits CNN trained with PyTorch DDP: a SageMaker PyTorch data-parallel script, unchanged.

Started once per rank (trainops' plain launcher, torchrun, or by hand with RANK/WORLD_SIZE
set), it joins the process group when there is more than one rank, gives each rank its share of
every epoch (DistributedSampler), and on rank 0 prints, each epoch,
``epoch=N samples_per_sec=... test_accuracy=...``: samples per second over all ranks, and the
accuracy on the test channel.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN"))
    parser.add_argument("--test", default=os.environ.get("SM_CHANNEL_TEST"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))
    return parser.parse_args()


def load(directory: str) -> TensorDataset:
    images, labels = [], []
    for path in sorted(Path(directory).rglob("*.npz")):
        with np.load(path) as data:
            batch = torch.from_numpy(data["images"]).float()
            images.append(batch if batch.dim() == 4 else batch.unsqueeze(1))
            labels.append(torch.from_numpy(data["labels"]).long())
    return TensorDataset(torch.cat(images), torch.cat(labels))


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


def main() -> None:
    args = parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    train, test = load(args.train), load(args.test)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    model = build_model()
    if world > 1:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * world)  # linear scaling
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        start, seen = time.perf_counter(), 0
        for images, labels in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(images), labels).backward()
            optimizer.step()
            seen += len(labels)
        elapsed = time.perf_counter() - start
        if rank == 0:
            model.eval()
            with torch.no_grad():
                images, labels = test.tensors
                accuracy = (model(images).argmax(1) == labels).float().mean().item()
            # Every rank saw as many samples as this one (DistributedSampler pads to equal).
            print(f"epoch={epoch} samples_per_sec={seen * world / elapsed:.1f} "
                  f"test_accuracy={accuracy:.4f}", flush=True)  # fmt: skip
    if rank == 0:
        Path(args.model_dir).mkdir(parents=True, exist_ok=True)
        module = model.module if isinstance(model, DistributedDataParallel) else model
        torch.save(module.state_dict(), Path(args.model_dir) / "model.pt")
    if world > 1:
        dist.barrier()  # every rank leaves together: gloo aborts a rank whose peers are gone
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
