"""The digits CNN as a spot job: checkpoints every few steps and resumes exactly where it stopped.

The model, the data and the metric lines are ``train.py``'s; what this script adds is what a
managed spot job needs (see job-spot.yaml):

- a checkpoint every ``--checkpoint-every`` optimizer steps and at every epoch's end, holding
  the model, the optimizer, the RNG states of torch, numpy and Python, the epoch and the step
  within it (the data order of an epoch is a fixed function of the seed and the epoch, so the
  step is the position in the data), the running loss and the history;
- written atomically: a temporary file, fsync, rename, fsync of the folder, so a reader (or
  the checkpoint sync) never sees a torn checkpoint; the last two are kept;
- restored at start from the newest readable checkpoint in /opt/ml/checkpoints
  (``SM_CHECKPOINT_DIR``), with a line saying which one and how old it is;
- on SIGTERM (spot's notice of an interruption) it finishes the step it is in, writes a
  checkpoint and dies of the SIGTERM, so the notice window costs no work.

An interrupted run therefore ends with the same weights, bit for bit, as one that was never
interrupted (same seed; ``--threads``, 1 by default, fixes how the kernels split their sums).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any


class Notice:
    """Set by SIGTERM: the loop checkpoints after the current step and then dies of the signal.

    Installed before torch is imported (below), so that a notice that comes while the script is
    still starting is kept, and answered with a checkpoint after the first step.
    """

    received = False

    @classmethod
    def install(cls) -> None:
        signal.signal(signal.SIGTERM, cls._handle)

    @classmethod
    def _handle(cls, signum: int, frame: Any) -> None:
        cls.received = True

    @staticmethod
    def die() -> None:
        """Exit the way an unhandled SIGTERM would (status -15), after the checkpoint."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # the signal is delivered before this returns


if __name__ == "__main__":
    Notice.install()

# The heavy imports come after the handler (seconds on a busy machine): see Notice.
import argparse  # noqa: E402
import hashlib  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from train import (  # noqa: E402
    OPTIMIZERS,
    build_model,
    build_parser,
    checked,
    evaluate,
    load_channel,
    log_epoch,
    save_results,
)

CHECKPOINT = re.compile(r"^checkpoint-step-(\d+)\.pt$")
KEEP_CHECKPOINTS = 2
STATE_KEYS = {"model", "optimizer", "rng", "epoch", "step", "global_step", "loss_sum", "history"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser("The digits CNN with exact checkpoints.")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="optimizer steps")
    # The sums inside a kernel split by thread: a fixed count keeps the weights bitwise-equal
    # wherever the job runs (a host's core count is not part of the checkpoint).
    parser.add_argument("--threads", type=int, default=1)
    args = checked(parser, parser.parse_args(argv))
    if args.checkpoint_every < 1:
        parser.error("--checkpoint-every must be at least 1")
    return args


def rng_states() -> dict[str, Any]:
    """The RNG states as plain lists and tensors (``torch.load(weights_only=True)`` reads them)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "python": [version, list(internal), gauss_next],
    }


def set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    name, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))


def checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """``(global step, path)`` of every checkpoint in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    found = [(CHECKPOINT.match(p.name), p) for p in directory.iterdir()]
    return sorted((int(m.group(1)), p) for m, p in found if m)


def save_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    """Temporary file, fsync, rename, fsync the folder; then drop all but the newest two."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"checkpoint-step-{state['global_step']:07d}.pt"
    tmp = directory / f".{final.name}.tmp"
    with tmp.open("wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, final)
    folder = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    for _step, old in checkpoints(directory)[:-KEEP_CHECKPOINTS]:
        old.unlink(missing_ok=True)


def restore(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Load the newest usable checkpoint and say which; a fresh start when there is none.

    A checkpoint that does not load or does not hold every part is skipped with its reason (a
    damaged copy must not stop training): the next older one is tried.
    """
    for _step, path in reversed(checkpoints(directory)):
        try:
            state: dict[str, Any] = torch.load(path, weights_only=True)
            missing = STATE_KEYS - set(state)
            if missing:
                raise ValueError(f"no {', '.join(sorted(missing))} in it")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            set_rng_states(state["rng"])
        except Exception as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            print(f"skipping unusable checkpoint {path.name}: {reason}", flush=True)
            continue
        age = time.time() - path.stat().st_mtime
        print(
            f"resumed from {path.name}: epoch {state['epoch']} step {state['step']} "
            f"(global step {state['global_step']}), written {age:.1f} s ago",
            flush=True,
        )
        return state
    print("no checkpoint: starting from scratch", flush=True)
    return {"epoch": 1, "step": 0, "global_step": 0, "loss_sum": 0.0, "history": []}


def weights_digest(model: nn.Module) -> str:
    """SHA-256 of every parameter's bytes, in order: equal digests are bitwise-equal models."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def epoch_order(seed: int, epoch: int, size: int) -> torch.Tensor:
    """The data order of one epoch: a function of the seed and the epoch only."""
    return torch.randperm(size, generator=torch.Generator().manual_seed(seed * 1000 + epoch))


class Trainer:
    """The training loop, its position (epoch, step) and its checkpoints."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        torch.set_num_threads(args.threads)
        torch.manual_seed(args.seed)
        np.random.seed(args.seed)
        random.seed(args.seed)
        self.train_data, self.test_data = load_channel(args.train), load_channel(args.test)
        self.model = build_model()
        self.optimizer = OPTIMIZERS[args.optimizer](self.model.parameters(), lr=args.lr)
        self.directory = Path(args.checkpoint_dir)
        self.state = restore(self.directory, self.model, self.optimizer)
        self.history: list[dict[str, float]] = list(self.state["history"])

    def checkpoint(self) -> None:
        self.state.update(
            model=self.model.state_dict(),
            optimizer=self.optimizer.state_dict(),
            rng=rng_states(),
            history=self.history,
        )
        save_checkpoint(self.directory, self.state)

    def step(self, order: torch.Tensor) -> None:
        images, labels = self.train_data
        batch = order[self.state["step"] * self.args.batch_size :][: self.args.batch_size]
        self.model.train()
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(images[batch]), labels[batch])
        loss.backward()
        self.optimizer.step()
        self.state["loss_sum"] += loss.item() * len(batch)
        self.state["step"] += 1
        self.state["global_step"] += 1

    def epoch(self) -> None:
        """The rest of the current epoch from its saved step, then its test figures."""
        size = len(self.train_data[1])
        order = epoch_order(self.args.seed, self.state["epoch"], size)
        steps = -(-size // self.args.batch_size)
        while self.state["step"] < steps:
            self.step(order)
            if Notice.received:
                self.checkpoint()
                print(f"notice: checkpoint at step {self.state['global_step']}", flush=True)
                Notice.die()
            if self.state["global_step"] % self.args.checkpoint_every == 0:
                self.checkpoint()
        test_loss, accuracy = evaluate(self.model, self.test_data)
        row = {
            "epoch": self.state["epoch"],
            "train_loss": self.state["loss_sum"] / size,
            "test_loss": test_loss,
            "test_accuracy": accuracy,
        }
        self.history.append(row)
        log_epoch(row)
        self.state.update(epoch=self.state["epoch"] + 1, step=0, loss_sum=0.0)
        self.checkpoint()

    def run(self) -> None:
        trained = False
        while self.state["epoch"] <= self.args.epochs:
            self.epoch()
            trained = True
        if self.history and not trained:
            log_epoch(self.history[-1])  # a run resumed at the end still reports final metrics
        save_results(self.args, self.model, self.history)
        print(f"model_sha256={weights_digest(self.model)}", flush=True)
        print(f"saved model to {self.args.model_dir}", flush=True)


def main(argv: list[str] | None = None) -> None:
    Notice.install()  # again, for a caller that imports this module and calls main()
    Trainer(parse_args(argv)).run()


if __name__ == "__main__":
    main()
