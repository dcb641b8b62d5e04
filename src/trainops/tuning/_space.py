"""Parameter ranges (Continuous, Integer, Categorical), their scaling, and Grid enumeration.

A range is declared as SageMaker's ``ParameterRanges`` declare it (``MinValue``/``MaxValue``,
``ScalingType`` ``Auto | Linear | Logarithmic | ReverseLogarithmic``, ``Values``), keyed by the
hyperparameter's name::

    hyperparameter_ranges:
      lr: {type: Continuous, min_value: 1e-4, max_value: 0.1, scaling_type: Logarithmic}
      batch_size: {type: Integer, min_value: 16, max_value: 128}
      optimizer: [sgd, adam]            # a list is a Categorical range

``Auto`` scaling is Logarithmic when the range is positive and spans at least two orders of
magnitude, Linear otherwise (SageMaker chooses it by its own heuristic and does not publish it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from trainops.spec._base import FieldValueError, SpecModel
from trainops.tuning._records import TunedValue

__all__ = [
    "MAX_CATEGORICAL_VALUES",
    "CategoricalParameter",
    "ContinuousParameter",
    "IntegerParameter",
    "ParameterRange",
    "ParameterType",
    "ScalingType",
    "effective_scaling",
    "grid_size",
    "grid_values",
    "sagemaker_string",
]

MAX_CATEGORICAL_VALUES = 30
AUTO_LOG_SPAN = 100.0  # Auto picks Logarithmic for positive ranges with max/min at least this


class ParameterType(StrEnum):
    """The kind of a range (SageMaker's ``ParameterRange.__all_types__``)."""

    CONTINUOUS = "Continuous"
    INTEGER = "Integer"
    CATEGORICAL = "Categorical"


class ScalingType(StrEnum):
    """How the search spreads values over a numeric range."""

    AUTO = "Auto"
    LINEAR = "Linear"
    LOGARITHMIC = "Logarithmic"
    REVERSE_LOGARITHMIC = "ReverseLogarithmic"


def _canonical(value: Any, choices: type[StrEnum]) -> Any:
    """``value`` spelled as one of ``choices`` regardless of case (``logarithmic`` too)."""
    if isinstance(value, str):
        for choice in choices:
            if choice.value.lower() == value.lower():
                return choice.value
    return value


class ParameterRange(SpecModel):
    """One tuned hyperparameter's range."""

    type: ParameterType = Field(description="Continuous, Integer or Categorical")
    min_value: float | None = Field(default=None, description="lowest value (numeric ranges)")
    max_value: float | None = Field(default=None, description="highest value (numeric ranges)")
    scaling_type: ScalingType = Field(default=ScalingType.AUTO)
    values: list[TunedValue] | None = Field(default=None, description="Categorical values")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, list):
            return {"type": ParameterType.CATEGORICAL.value, "values": data}
        if isinstance(data, dict):
            data = dict(data)
            if "type" in data:
                data["type"] = _canonical(data["type"], ParameterType)
            if "scaling_type" in data:
                data["scaling_type"] = _canonical(data["scaling_type"], ScalingType)
        return data

    @field_validator("values", mode="before")
    @classmethod
    def _booleans(cls, value: Any) -> Any:
        # YAML's true/false: passed as SageMaker's JSON spells them (a script reads "true").
        if isinstance(value, list):
            return [("true" if v else "false") if isinstance(v, bool) else v for v in value]
        return value

    @field_validator("values")
    @classmethod
    def _values(cls, value: list[TunedValue] | None) -> list[TunedValue] | None:
        if value is None:
            return None
        if not 1 <= len(value) <= MAX_CATEGORICAL_VALUES:
            raise ValueError(f"{len(value)} values; a Categorical range has 1 to 30")
        texts = [str(v) for v in value]
        repeated = sorted({t for t in texts if texts.count(t) > 1})
        if repeated:
            raise ValueError(f"values must be distinct; repeated: {', '.join(repeated)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ParameterRange:
        if self.type is ParameterType.CATEGORICAL:
            _check_categorical(self)
        else:
            _check_numeric(self)
        return self


def _check_categorical(rng: ParameterRange) -> None:
    if rng.values is None:
        raise FieldValueError("values", "a Categorical range needs 'values', e.g. [sgd, adam]")
    if rng.min_value is not None or rng.max_value is not None:
        field = "min_value" if rng.min_value is not None else "max_value"
        raise FieldValueError(field, "a Categorical range takes 'values', not min_value/max_value")
    if rng.scaling_type is not ScalingType.AUTO:
        raise FieldValueError("scaling_type", "a Categorical range has no scaling_type")


def _check_numeric(rng: ParameterRange) -> None:
    kind = rng.type.value
    if rng.values is not None:
        raise FieldValueError(
            "values", f"a {kind} range takes min_value and max_value, not 'values'"
        )
    if rng.min_value is None or rng.max_value is None:
        missing = "min_value" if rng.min_value is None else "max_value"
        raise FieldValueError(missing, f"a {kind} range needs min_value and max_value")
    low, high = rng.min_value, rng.max_value
    if not (math.isfinite(low) and math.isfinite(high)):
        field = "max_value" if math.isfinite(low) else "min_value"
        raise FieldValueError(field, "min_value and max_value must be finite numbers")
    if rng.type is ParameterType.INTEGER and not (low.is_integer() and high.is_integer()):
        field = "max_value" if low.is_integer() else "min_value"
        raise FieldValueError(field, f"an Integer range needs whole numbers, not {low:g}..{high:g}")
    if low > high:
        raise FieldValueError(
            "min_value", f"min_value {low:g} is above max_value {high:g}; swap them"
        )
    _check_scaling(rng.type, rng.scaling_type, low, high)


def _check_scaling(kind: ParameterType, scaling: ScalingType, low: float, high: float) -> None:
    if scaling is ScalingType.LOGARITHMIC and low <= 0:
        raise FieldValueError(
            "min_value",
            f"Logarithmic scaling needs values above 0, but min_value is {low:g}: "
            "raise min_value above 0 or use scaling_type: Linear",
        )
    if scaling is ScalingType.REVERSE_LOGARITHMIC:
        if kind is not ParameterType.CONTINUOUS:
            raise FieldValueError(
                "scaling_type", "ReverseLogarithmic scaling is for Continuous ranges only"
            )
        if not (low >= 0 and high < 1):
            raise FieldValueError(
                "max_value" if low >= 0 else "min_value",
                f"ReverseLogarithmic scaling needs 0 <= min_value and max_value < 1, "
                f"not {low:g}..{high:g}: use Linear or Logarithmic for this range",
            )


def ContinuousParameter(
    min_value: float, max_value: float, scaling_type: str = "Auto"
) -> ParameterRange:
    """A Continuous range, as the SDK's ``ContinuousParameter(min_value, max_value, ...)``."""
    return _numeric("Continuous", min_value, max_value, scaling_type)


def IntegerParameter(min_value: int, max_value: int, scaling_type: str = "Auto") -> ParameterRange:
    """An Integer range, as the SDK's ``IntegerParameter(min_value, max_value, ...)``."""
    return _numeric("Integer", min_value, max_value, scaling_type)


def CategoricalParameter(values: list[TunedValue]) -> ParameterRange:
    """A Categorical range, as the SDK's ``CategoricalParameter(values)``."""
    fields: dict[str, Any] = {"type": "Categorical", "values": list(values)}
    return ParameterRange(**fields)


def _numeric(kind: str, low: float, high: float, scaling: str) -> ParameterRange:
    fields: dict[str, Any] = {
        "type": kind,
        "min_value": low,
        "max_value": high,
        "scaling_type": scaling,
    }
    return ParameterRange(**fields)


def effective_scaling(rng: ParameterRange) -> ScalingType:
    """The scaling the search uses for ``rng``: ``Auto`` resolved (see the module's docs)."""
    if rng.scaling_type is not ScalingType.AUTO or rng.type is ParameterType.CATEGORICAL:
        return rng.scaling_type
    assert rng.min_value is not None and rng.max_value is not None
    if rng.min_value > 0 and rng.max_value / rng.min_value >= AUTO_LOG_SPAN:
        return ScalingType.LOGARITHMIC
    return ScalingType.LINEAR


def sagemaker_string(value: TunedValue) -> str:
    """The string SageMaker passes for a tuned value: integers in decimal, floats in their
    shortest round-tripping form (``0.001``, ``1e-05``), categorical values as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def grid_size(ranges: Mapping[str, ParameterRange]) -> int:
    """How many combinations a Grid search over the Categorical ``ranges`` has."""
    return math.prod(len(rng.values or ()) for rng in ranges.values())


def grid_values(ranges: Mapping[str, ParameterRange], index: int) -> dict[str, TunedValue]:
    """The ``index``-th combination of the Categorical ``ranges`` (names in sorted order, the
    last name varying fastest, each range's values in the order declared)."""
    names = sorted(ranges)
    choices = [list(ranges[name].values or ()) for name in names]
    combination = next(itertools.islice(itertools.product(*choices), index, None))
    return dict(zip(names, combination, strict=True))
