"""Parameter ranges: their refusals, Auto scaling, the strings SageMaker passes, Grid order."""

from __future__ import annotations

import math
from typing import Any

import pytest

from trainops import SpecError
from trainops.tuning import ParameterRange, ParameterType, ScalingType
from trainops.tuning._space import effective_scaling, grid_size, grid_values, sagemaker_string


def _range(**fields: Any) -> ParameterRange:
    return ParameterRange(**fields)


def test_a_list_is_a_categorical_range_and_names_are_case_free() -> None:
    assert ParameterRange.model_validate(["sgd", "adam"]).values == ["sgd", "adam"]
    rng = _range(type="continuous", min_value="1e-4", max_value=1, scaling_type="logarithmic")
    assert (rng.type, rng.scaling_type) == (ParameterType.CONTINUOUS, ScalingType.LOGARITHMIC)
    assert rng.min_value == pytest.approx(1e-4)  # min and max are strings in SageMaker's API


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"type": "Continuous", "min_value": 0, "max_value": 1, "scaling_type": "Logarithmic"},
         "Logarithmic scaling needs values above 0, but min_value is 0"),
        ({"type": "Integer", "min_value": -3, "max_value": 9, "scaling_type": "Logarithmic"},
         "raise min_value above 0 or use scaling_type: Linear"),
        ({"type": "Continuous", "min_value": 0.5, "max_value": 1, "scaling_type":
          "ReverseLogarithmic"}, "needs 0 <= min_value and max_value < 1"),
        ({"type": "Continuous", "min_value": -0.1, "max_value": 0.9, "scaling_type":
          "ReverseLogarithmic"}, "needs 0 <= min_value and max_value < 1"),
        ({"type": "Integer", "min_value": 0, "max_value": 0, "scaling_type": "ReverseLogarithmic"},
         "for Continuous ranges only"),
        ({"type": "Integer", "min_value": 1.5, "max_value": 4}, "needs whole numbers"),
        ({"type": "Continuous", "min_value": 2, "max_value": 1}, "is above max_value 1; swap"),
        ({"type": "Continuous", "min_value": 1}, "needs min_value and max_value"),
        ({"type": "Continuous", "min_value": "nan", "max_value": 1}, "must be finite"),
        ({"type": "Continuous", "min_value": 0, "max_value": "inf"}, "must be finite"),
        ({"type": "Continuous", "values": [1, 2]}, "not 'values'"),
        ({"type": "Categorical"}, "needs 'values'"),
        ({"type": "Categorical", "values": []}, "0 values; a Categorical range has 1 to 30"),
        ({"type": "Categorical", "values": list(range(31))}, "31 values"),
        ({"type": "Categorical", "values": ["a", "b", "a"]}, "repeated: a"),
        ({"type": "Categorical", "values": ["a"], "min_value": 1}, "not min_value/max_value"),
        ({"type": "Categorical", "values": ["a"], "scaling_type": "Linear"}, "no scaling_type"),
        ({"type": "Uniform", "min_value": 0, "max_value": 1}, "Continuous"),
    ],
)  # fmt: skip
def test_refusals_say_what_is_wrong_and_the_fix(fields: dict[str, Any], reason: str) -> None:
    with pytest.raises(SpecError) as caught:
        _range(**fields)
    assert reason in str(caught.value)


def test_edge_values_are_accepted() -> None:
    _range(type="Continuous", min_value=0, max_value=0.999999, scaling_type="ReverseLogarithmic")
    _range(type="Integer", min_value=1, max_value=1, scaling_type="Logarithmic")
    _range(type="Continuous", min_value=1e-300, max_value=1e300, scaling_type="Logarithmic")
    _range(type="Categorical", values=list(range(30)))


@pytest.mark.parametrize(
    ("low", "high", "kind", "expected"),
    [
        (1e-4, 1e-1, "Continuous", ScalingType.LOGARITHMIC),
        (1, 100, "Integer", ScalingType.LOGARITHMIC),  # two orders of magnitude
        (1, 99, "Integer", ScalingType.LINEAR),
        (0, 1000, "Continuous", ScalingType.LINEAR),  # not positive
        (-10, 10, "Continuous", ScalingType.LINEAR),
    ],
)
def test_auto_scaling(low: float, high: float, kind: str, expected: ScalingType) -> None:
    assert effective_scaling(_range(type=kind, min_value=low, max_value=high)) is expected


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.001, "0.001"), (1e-05, "1e-05"), (0.1 + 0.2, "0.30000000000000004"), (2.0, "2.0"),
     (32, "32"), ("adam", "adam"), (True, "true")],
)  # fmt: skip
def test_sagemaker_strings_round_trip(value: Any, text: str) -> None:
    assert sagemaker_string(value) == text
    if isinstance(value, float):
        assert float(text) == value  # the script reads back exactly the proposed value


def test_grid_enumerates_every_combination_once_in_a_fixed_order() -> None:
    ranges = {
        "opt": _range(type="Categorical", values=["sgd", "adam"]),
        "bs": _range(type="Categorical", values=[16, 32, 64]),
    }
    assert grid_size(ranges) == 6
    combos = [grid_values(ranges, i) for i in range(6)]
    assert combos[0] == {"bs": 16, "opt": "sgd"}
    assert combos[1] == {"bs": 16, "opt": "adam"}
    assert combos[-1] == {"bs": 64, "opt": "adam"}
    assert len({tuple(sorted(c.items())) for c in combos}) == 6
    assert math.prod([2, 3]) == len(combos)


def test_the_sdk_style_parameters_make_the_same_ranges() -> None:
    from trainops.tuning import CategoricalParameter, ContinuousParameter, IntegerParameter

    assert ContinuousParameter(1e-4, 0.1, "Logarithmic") == _range(
        type="Continuous", min_value=1e-4, max_value=0.1, scaling_type="Logarithmic"
    )
    assert IntegerParameter(16, 128) == _range(type="Integer", min_value=16, max_value=128)
    assert CategoricalParameter(["sgd", "adam"]).values == ["sgd", "adam"]
    with pytest.raises(SpecError, match="Logarithmic scaling needs values above 0"):
        ContinuousParameter(0, 1, "Logarithmic")


def test_a_python_config_takes_the_sdk_style_parameters() -> None:
    from tests.tuning.conftest import make_config
    from trainops.tuning import CategoricalParameter, ContinuousParameter

    ranges = {"lr": ContinuousParameter(1e-4, 0.1), "optimizer": CategoricalParameter(["a", "b"])}
    config = make_config(hyperparameter_ranges=ranges)
    assert effective_scaling(config.hyperparameter_ranges["lr"]) is ScalingType.LOGARITHMIC
