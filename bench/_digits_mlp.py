"""A one-hidden-layer MLP on scikit-learn's digits in plain numpy: the early-stopping benchmark's
learning curves, in process (``learning_curve``) and as a training job's script (run as
``train.py`` beside ``digits.npz``, it prints ``epoch=N val_loss=X`` after each epoch).

Numpy only, so that a trial's process starts in a fraction of a second (importing scikit-learn's
MLP takes seconds on a loaded 2-core machine): ReLU, softmax, Adam, minibatches, an L2 penalty
scaled as scikit-learn's ``MLPClassifier`` scales ``alpha``, Glorot-uniform weights. The training
seed comes from the benchmark's seed and the hyperparameters, so a configuration gives the same
curve in process and as a job. A curve ends early where the weights diverge (no NaN reported).
As a job, ``--epoch_seconds`` pads each epoch to that pace (an epoch here takes milliseconds).
"""

from __future__ import annotations

import argparse
import math
import time
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

Data = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
TUNED = ("learning_rate", "hidden_units", "alpha", "batch_size")


def training_seed(seed: int, hp: Mapping[str, object]) -> int:
    """The seed of one configuration's training: the benchmark's seed and the tuned values."""
    key = ",".join(f"{name}={float(hp[name])!r}" for name in TUNED)  # type: ignore[arg-type]
    return zlib.crc32(f"{seed}:{key}".encode())


def load_digits_split() -> Data:
    """Digits, a fixed stratified two-thirds / one-third split, standardised on the training part
    (needs scikit-learn: the benchmark runs this once and saves it with :func:`save`)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=1 / 3, random_state=0, stratify=y
    )
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    std[std == 0] = 1.0
    return (x_train - mean) / std, y_train, (x_val - mean) / std, y_val


def save(data: Data, path: Path) -> None:
    x_train, y_train, x_val, y_val = data
    np.savez(path, x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val)


def load(path: Path) -> Data:
    with np.load(path) as saved:
        return saved["x_train"], saved["y_train"], saved["x_val"], saved["y_val"]


def learning_curve(data: Data, hp: Mapping[str, object], seed: int, epochs: int) -> Iterator[float]:
    """The validation log-loss after each of ``epochs`` epochs of training with ``hp``."""
    x, y, x_val, y_val = data
    rng = np.random.default_rng(training_seed(seed, hp))
    hidden, batch = int(hp["hidden_units"]), int(hp["batch_size"])  # type: ignore[call-overload]
    lr, alpha = float(hp["learning_rate"]), float(hp["alpha"])  # type: ignore[arg-type]
    params = [_glorot(rng, x.shape[1], hidden), np.zeros(hidden),
              _glorot(rng, hidden, 10), np.zeros(10)]  # fmt: skip
    moments = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    onehot, steps = np.eye(10)[y], 0
    with np.errstate(all="ignore"):
        for _ in range(epochs):
            order = rng.permutation(len(x))
            for start in range(0, len(x), batch):
                rows = order[start : start + batch]
                steps += 1
                grads = _gradients(params, x[rows], onehot[rows], alpha)
                _adam(params, grads, moments, lr, steps)
            loss = _log_loss(params, x_val, y_val)
            if not math.isfinite(loss):
                return
            yield loss


def _glorot(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-bound, bound, (fan_in, fan_out))


def _forward(params: list[np.ndarray], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w1, b1, w2, b2 = params
    hidden = np.maximum(x @ w1 + b1, 0.0)
    logits = hidden @ w2 + b2
    logits -= logits.max(axis=1, keepdims=True)
    proba = np.exp(logits)
    return hidden, proba / proba.sum(axis=1, keepdims=True)


def _gradients(
    params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray, alpha: float
) -> list[np.ndarray]:
    w1, _, w2, _ = params
    hidden, proba = _forward(params, x)
    n = len(x)
    d_out = (proba - onehot) / n
    d_hidden = (d_out @ w2.T) * (hidden > 0)
    return [x.T @ d_hidden + alpha * w1 / n, d_hidden.sum(axis=0),
            hidden.T @ d_out + alpha * w2 / n, d_out.sum(axis=0)]  # fmt: skip


def _adam(
    params: list[np.ndarray],
    grads: list[np.ndarray],
    moments: tuple[list[np.ndarray], list[np.ndarray]],
    lr: float,
    step: int,
) -> None:
    first, second = moments
    rate = lr * math.sqrt(1 - 0.999**step) / (1 - 0.9**step)
    for p, g, m, v in zip(params, grads, first, second, strict=True):
        m *= 0.9
        m += 0.1 * g
        v *= 0.999
        v += 0.001 * g * g
        p -= rate * m / (np.sqrt(v) + 1e-8)


def _log_loss(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    _, proba = _forward(params, x)
    picked = np.clip(proba[np.arange(len(y)), y], 1e-15, 1.0)
    return float(-np.log(picked).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in TUNED:
        parser.add_argument(f"--{name}", type=float, required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epoch_seconds", type=float, default=0.0)
    args, _ = parser.parse_known_args()  # and _tuning_objective_metric
    data = load(Path(__file__).with_name("digits.npz"))
    hp = {name: getattr(args, name) for name in TUNED}
    due = time.monotonic()
    for epoch, loss in enumerate(learning_curve(data, hp, args.seed, args.epochs), start=1):
        due += args.epoch_seconds  # an epoch padded to this pace (see the benchmark)
        time.sleep(max(0.0, due - time.monotonic()))
        print(f"epoch={epoch} val_loss={loss:.6f}", flush=True)


if __name__ == "__main__":
    main()
