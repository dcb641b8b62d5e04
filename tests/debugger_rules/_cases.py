"""For each built-in debugger rule: parameters, a series built to trigger it, a healthy one.

The conformance suite (``test_conformance.py``) runs every registered rule over both; a rule
without a case here fails it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.debugger_rules._series import Series
from trainops.debugger import ModeKeys

__all__ = ["CASES", "Case"]

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


@dataclass(frozen=True)
class Case:
    """``trigger()`` and ``healthy()`` build the two series; ``other`` builds the run that
    SimilarAcrossRuns compares with (given the trigger flag)."""

    parameters: dict[str, Any]
    trigger: Callable[[], Series]
    healthy: Callable[[], Series]
    other: Callable[[bool], Series] | None = None


def _each(steps: range, make: Callable[[int], dict[str, Any]], mode: ModeKeys = TRAIN) -> Series:
    series = Series()
    for step in steps:
        series.add(step, mode, **make(step))
    return series


def _gradients(scale: float) -> Series:
    rng = _rng()
    return _each(range(4), lambda s: {"gradient__fc.weight": rng.standard_normal((8, 8)) * scale})


def _weights(make: Callable[[int], Any]) -> Series:
    return _each(range(4), lambda s: {"fc.weight": make(s)})


def _losses(values: list[float]) -> Series:
    return _each(range(len(values)), lambda s: {"loss": np.float32(values[s])})


def _train_then_eval(train: list[float], evals: list[float]) -> Series:
    series = Series()
    for step, value in enumerate(train):
        series.add(step, TRAIN, step, loss=np.float32(value))
    for index, value in enumerate(evals):
        series.add(len(train) + index, EVAL, index, loss=np.float32(value))
    return series


def _activations(name: str, make: Callable[[np.random.Generator], Any]) -> Series:
    rng = _rng()
    return _each(range(3), lambda s: {name: make(rng)})


def _poor_init(high_variance: float) -> Series:
    rng = _rng()
    return _each(
        range(3),
        lambda s: {
            "layer1_relu_input": rng.standard_normal((32, 16)),
            "layer2_relu_input": rng.standard_normal((32, 16)) * np.sqrt(high_variance),
            "gradient__fc.weight": rng.standard_normal((8, 8)) * 0.1,
            "loss": np.float32(1.0 / (1 + s)),
        },
    )


def _classes(labels: Any, predictions: Any) -> Series:
    return Series().add(0, labels=np.asarray(labels), predictions=np.asarray(predictions))


def _imbalanced() -> Series:
    labels = np.zeros(1000, dtype=np.int64)
    labels[-10:] = 1
    return _classes(labels, labels)


def _balanced() -> Series:
    labels = np.arange(1000, dtype=np.int64) % 10
    return _classes(labels, labels)


def _confused() -> Series:
    predictions = np.arange(10)
    predictions[4] = 7
    return _classes(np.arange(10), predictions)


def _images(make: Callable[[np.random.Generator], Any]) -> Series:
    rng = _rng()
    return _each(range(2), lambda s: {"hybridsequential0_input_0": make(rng)})


def _tokens(zero_share: float) -> Series:
    rng = _rng()

    def make(step: int) -> dict[str, Any]:
        tokens = rng.integers(1, 100, size=(16, 32))
        tokens[rng.random((16, 32)) < zero_share] = 0
        return {"embedding0_input_0": tokens}

    return _each(range(2), make)


def _similar(differs: bool) -> Series:
    rng = _rng()
    series = Series()
    for step in range(3):
        value = rng.standard_normal((4, 4))
        series.add(step, **{"fc.weight": value + (1.0 if differs and step == 2 else 0.0)})
    return series


def _similar_base() -> Series:
    return _similar(False)


CASES: dict[str, Case] = {
    "VanishingGradient": Case({}, lambda: _gradients(1e-9), lambda: _gradients(0.01)),
    "ExplodingTensor": Case(
        {},
        lambda: _weights(lambda s: np.full((4, 4), np.nan if s == 2 else 0.5, np.float32)),
        lambda: _weights(lambda s: np.full((4, 4), 0.5, np.float32) + s),
    ),
    "AllZero": Case(
        {"collection_names": ["weights"]},
        lambda: _weights(lambda s: np.zeros((4, 4))),
        lambda: _weights(lambda s: np.ones((4, 4)) * (s + 1)),
    ),
    "UnchangedTensor": Case(
        {"collection_names": ["weights"]},
        lambda: _weights(lambda s: np.ones((4, 4))),
        lambda: _weights(lambda s: np.ones((4, 4)) * (s + 1)),
    ),
    "LossNotDecreasing": Case(
        {},
        lambda: _losses([1.0] * 25),
        lambda: _losses([1.0 / (1 + s) for s in range(25)]),
    ),
    "Overfit": Case(
        {},
        lambda: _train_then_eval([0.5] * 10, [1.0]),
        lambda: _train_then_eval([0.5] * 10, [0.52]),
    ),
    "Overtraining": Case(
        {"patience_train": 2, "patience_validation": 2},
        lambda: _train_then_eval([1.0] * 6, [0.8] * 4),
        lambda: _train_then_eval(
            [1.0 / (1 + s) for s in range(6)], [0.8 / (1 + s) for s in range(4)]
        ),
    ),
    "PoorWeightInitialization": Case({}, lambda: _poor_init(1000.0), lambda: _poor_init(1.5)),
    "SaturatedActivation": Case(
        {},
        lambda: _activations("layer_tanh_input", lambda r: np.full((32, 16), 20.0)),
        lambda: _activations("layer_tanh_input", lambda r: r.standard_normal((32, 16))),
    ),
    "DeadRelu": Case(
        {},
        lambda: _activations("layer_relu_output", lambda r: np.zeros((32, 16))),
        lambda: _activations("layer_relu_output", lambda r: np.abs(r.standard_normal((32, 16)))),
    ),
    "WeightUpdateRatio": Case(
        {},
        lambda: _weights(lambda s: np.ones((4, 4))),
        lambda: _weights(lambda s: np.ones((4, 4)) * (1.01**s)),
    ),
    "TensorVariance": Case(
        {"collection_names": ["weights"], "max_threshold": 10},
        lambda: _weights(lambda s: _rng().standard_normal((8, 8)) * 100),
        lambda: _weights(lambda s: _rng().standard_normal((8, 8))),
    ),
    "ClassImbalance": Case({}, _imbalanced, _balanced),
    "Confusion": Case({}, _confused, lambda: _classes(np.arange(10), np.arange(10))),
    "CheckInputImages": Case(
        {},
        lambda: _images(lambda r: r.random((256, 3, 4, 4))),
        lambda: _images(lambda r: r.standard_normal((256, 3, 4, 4)) * 0.1),
    ),
    "NLPSequenceRatio": Case({}, lambda: _tokens(0.8), lambda: _tokens(0.0)),
    "StalledTrainingRule": Case(
        {"threshold": 60},
        lambda: _losses([1.0, 0.9]),
        lambda: _losses([1.0, 0.9]),
    ),
    "SimilarAcrossRuns": Case({}, _similar_base, _similar_base, other=_similar),
}
