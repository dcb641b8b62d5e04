"""The built-in debugger rules (reference/sagemaker.md §5.6): parameters, defaults, collections.

Defaults are those SageMaker documents for ``rule_configs.<fn>()``; the collections are what
the rule's default configuration saves (SageMaker's ``ruleConfigs.json``), merged into the job's
debugger hook configuration as the SDK does. Parameters may be given as the SDK sends them (all
strings: ``"0.001"``, ``"True"``) or as YAML values; they resolve to typed values:

- numbers (``float``; ``threshold``, ``diff_percent`` ...), whole numbers (``int``; ``patience``,
  ``num_steps`` ...), booleans, ``mode`` (``"TRAIN"``, ``"EVAL"``, ``"GLOBAL"`` or ``None``);
- regular expressions and names (``str``, checked to compile / to be printable);
- ``collection_names``: a list of collection names (a comma-separated string is split);
- ``token_values`` / ``token_thresholds_percent``: comma-separated numbers, kept as the string.

A default of ``None`` means "unset" (the rule decides: e.g. LossNotDecreasing tries EVAL, then
TRAIN, then GLOBAL). The XGBoost rules (TreeDepth, FeatureImportanceOverweight) and
CreateXgboostReport are named in ``LATER_RULES``: refused with a line saying so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from trainops.spec._rule_definition import RuleDefinition

__all__ = [
    "COLLECTION_NAME",
    "CUSTOM",
    "DEBUGGER_RULES",
    "LATER_RULES",
    "MAX_TEXT",
    "check_debugger_parameters",
]

MAX_TEXT = 1024
_SAVE_500 = {"save_interval": "500"}
_MODES = ("TRAIN", "EVAL", "GLOBAL")
COLLECTION_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _debugger(
    name: str,
    sdk_name: str,
    summary: str,
    collections: tuple[tuple[str, Mapping[str, str]], ...] = (),
    /,
    **defaults: Any,
) -> RuleDefinition:
    return RuleDefinition(name, "debugger", defaults, summary, collections, sdk_name)


_SCOPE = {"collection_names": None, "tensor_regex": None}

_RULES = (
    _debugger(
        "VanishingGradient",
        "vanishing_gradient",
        "the mean absolute gradient falls below threshold",
        (("gradients", _SAVE_500),),
        threshold=1e-7,
    ),
    _debugger(
        "ExplodingTensor",
        "exploding_tensor",
        "a tensor holds NaN (or infinite) values",
        **_SCOPE,
        only_nan=False,
    ),
    _debugger(
        "PoorWeightInitialization",
        "poor_weight_initialization",
        "activation-input variance differs widely across layers, gradients barely spread, or "
        "the loss does not fall in the first steps",
        (("relu_input", {"include_regex": ".*relu_input", **_SAVE_500}),),
        activation_inputs_regex=".*relu_input",
        threshold=10.0,
        distribution_range=0.001,
        patience=5,
        steps=10,
    ),
    _debugger(
        "SaturatedActivation",
        "saturated_activation",
        "most tanh/sigmoid units of a layer are saturated",
        tensor_regex=".*tanh_input|.*sigmoid_input",
        threshold_tanh_min=-9.4999,
        threshold_tanh_max=9.4999,
        threshold_sigmoid_min=-23.0,
        threshold_sigmoid_max=16.99999,
        threshold_inactivity=1.0,
        threshold_layer=50.0,
    ),
    _debugger(
        "DeadRelu",
        "dead_relu",
        "most ReLUs of a layer are inactive",
        (("relu_output", {"include_regex": ".*relu_output", **_SAVE_500}),),
        tensor_regex=".*relu_output",
        threshold_inactivity=1.0,
        threshold_layer=50.0,
    ),
    _debugger(
        "WeightUpdateRatio",
        "weight_update_ratio",
        "weight updates are too large or too small for the weights",
        (("weights", _SAVE_500),),
        num_steps=None,
        large_threshold=10.0,
        small_threshold=1e-8,
        epsilon=1e-9,
    ),
    _debugger(
        "AllZero",
        "all_zero",
        "a tensor's values are (almost) all zero",
        **_SCOPE,
        threshold=100.0,
    ),
    _debugger(
        "ClassImbalance",
        "class_imbalance",
        "classes are imbalanced in the labels, or one class is mostly mispredicted",
        threshold_imbalance=10.0,
        threshold_misprediction=0.7,
        samples=500,
        argmax=False,
        labels_regex=".*labels",
        predictions_regex=".*predictions",
    ),
    _debugger(
        "LossNotDecreasing",
        "loss_not_decreasing",
        "the loss stops decreasing (or rises)",
        (("losses", _SAVE_500),),
        **_SCOPE,
        use_losses_collection=True,
        num_steps=10,
        diff_percent=0.1,
        increase_threshold_percent=5.0,
        mode=None,
    ),
    _debugger(
        "Overfit",
        "overfit",
        "the validation loss drifts away from the training loss",
        tensor_regex=None,
        start_step=0,
        patience=1,
        ratio_threshold=0.1,
    ),
    _debugger(
        "Overtraining",
        "overtraining",
        "training and then validation loss stop improving",
        patience_train=5,
        patience_validation=10,
        delta=0.01,
    ),
    _debugger(
        "SimilarAcrossRuns",
        "similar_across_runs",
        "tensors differ from those of another run (other_trials: its job name or debug URI)",
        other_trials=None,
        **_SCOPE,
    ),
    _debugger(
        "StalledTrainingRule",
        "stalled_training_rule",
        "no new tensor for threshold seconds",
        threshold=1800.0,
        stop_training_on_fire=False,
        training_job_name_prefix=None,
    ),
    _debugger(
        "TensorVariance",
        "tensor_variance",
        "a tensor's variance leaves [min_threshold, max_threshold]",
        **_SCOPE,
        max_threshold=None,
        min_threshold=None,
    ),
    _debugger(
        "UnchangedTensor",
        "unchanged_tensor",
        "a tensor stays the same over the last num_steps saved steps",
        **_SCOPE,
        num_steps=3,
        rtol=1e-5,
        atol=1e-8,
        equal_nan=False,
    ),
    _debugger(
        "CheckInputImages",
        "check_input_images",
        "input images are not normalized (mean far from 0)",
        (("input_image", {"include_regex": ".*hybridsequential0_input_0", **_SAVE_500}),),
        threshold_mean=0.2,
        threshold_samples=500,
        regex=".*hybridsequential0_input_0",
        channel=1,
    ),
    _debugger(
        "NLPSequenceRatio",
        "nlp_sequence_ratio",
        "given token ids (e.g. padding) fill too much of the input sequences",
        (("input_sequence", {"include_regex": ".*embedding0_input_0", **_SAVE_500}),),
        tensor_regex=".*embedding0_input_0",
        token_values="0",  # noqa: S106 (token ids, not a secret)
        token_thresholds_percent="50",  # noqa: S106
    ),
    _debugger(
        "Confusion",
        "confusion",
        "the confusion matrix of labels against predictions is off its diagonal",
        category_no=None,
        labels="labels",
        predictions="predictions",
        labels_collection="labels",
        predictions_collection="predictions",
        min_diag=0.9,
        max_off_diag=0.1,
    ),
)

DEBUGGER_RULES: dict[str, RuleDefinition] = {rule.name: rule for rule in _RULES}

#: A custom rule (SageMaker's ``Rule.custom``): ``source`` (a ``.py`` file of the job's source
#: folder, relative to it) defines the class ``rule_to_invoke`` (smdebug's ``Rule``); every other
#: parameter is passed to its constructor as a string.
CUSTOM = "Custom"
DEBUGGER_RULES[CUSTOM] = RuleDefinition(
    CUSTOM,
    "debugger",
    {"source": None, "rule_to_invoke": None},
    "a rule class from the job's source, run confined beside the control plane",
    (),
    "custom",
)
_CUSTOM_PARAMETERS = 100
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

_XGBOOST = "is an XGBoost rule trainops does not evaluate yet"
LATER_RULES: dict[str, str] = {
    "TreeDepth": _XGBOOST,
    "tree_depth": _XGBOOST,
    "FeatureImportanceOverweight": _XGBOOST,
    "feature_importance_overweight": _XGBOOST,
    "CreateXgboostReport": _XGBOOST,
    "create_xgboost_report": _XGBOOST,
}

# Parameters that must be given (their default ``None`` cannot stand).
_REQUIRED = {"SimilarAcrossRuns": ("other_trials",)}


def _number(value: Any, *, signed: bool = False) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"must be a number, not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number, not {value!r}")
    if not math.isfinite(value) or (not signed and value < 0):
        kind = "a finite number" if signed else "a finite number of 0 or more"
        raise ValueError(f"must be {kind}, not {value!r}")
    return float(value)


def _real(value: Any) -> float:
    return _number(value, signed=True)


def _whole(value: Any) -> int:
    number = _number(value)
    if number != int(number) or number > 2**53:
        raise ValueError(f"must be a whole number, not {value!r}")
    return int(number)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"must be true or false, not {value!r}")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {value!r}")
    if not value or len(value) > MAX_TEXT or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(
            f"must be 1-{MAX_TEXT} characters without control characters, not {value[:64]!r}"
        )
    return value


def _regex(value: Any) -> str:
    text = _text(value)
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"is not a regular expression ({exc}): {text[:64]!r}") from None
    return text


def _mode(value: Any) -> str:
    if isinstance(value, str) and value.strip().upper() in _MODES:
        return value.strip().upper()
    raise ValueError(f"must be one of {', '.join(_MODES)} or null, not {value!r}")


def _names(value: Any) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items or len(items) > 20:
        raise ValueError(f"must be 1-20 collection names (a list or a comma list), not {value!r}")
    names = [item.strip() if isinstance(item, str) else item for item in items]
    for name in names:
        if not isinstance(name, str) or not COLLECTION_NAME.match(name):
            raise ValueError(
                f"{name!r} is not a collection name (1-128 of [A-Za-z0-9_.-], not starting with . or -)"
            )
    return names


def _numbers_text(value: Any) -> str:
    text = _text(value if isinstance(value, str) else ",".join(str(v) for v in _listed(value)))
    for item in text.split(","):
        _real(item)
    return text


def _listed(value: Any) -> list[Any]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list | tuple) and 0 < len(value) <= 1000:
        return list(value)
    raise ValueError(f"must be comma-separated numbers, not {value!r}")


_KINDS: dict[str, Callable[[Any], Any]] = {
    "collection_names": _names,
    "token_values": _numbers_text,
    "token_thresholds_percent": _numbers_text,
    "mode": _mode,
    "threshold_tanh_min": _real,
    "threshold_sigmoid_min": _real,
    "min_threshold": _real,
    "max_threshold": _real,
    "other_trials": _text,
    "training_job_name_prefix": _text,
    "labels": _text,
    "predictions": _text,
    "labels_collection": _text,
    "predictions_collection": _text,
    "category_no": _whole,
    "num_steps": _whole,
}
_WHOLE = {"patience", "steps", "samples", "start_step", "patience_train", "patience_validation"}
_WHOLE |= {"threshold_samples", "channel"}


def _kind_of(key: str, default: Any) -> Callable[[Any], Any]:
    if key in _KINDS:
        return _KINDS[key]
    if key in _WHOLE:
        return _whole
    if key.endswith("regex"):
        return _regex
    if isinstance(default, bool):
        return _bool
    return _number


def check_debugger_parameters(rule: RuleDefinition, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against debugger rule ``rule``'s parameters; all of them, defaults
    filled and values typed. Raises ValueError naming the parameter."""
    if rule.name == CUSTOM:
        return _custom_parameters(given)
    resolved = dict(rule.defaults)
    for key, value in given.items():
        if key not in rule.defaults:
            known = ", ".join(sorted(rule.defaults))
            raise ValueError(f"{rule.name} has no parameter {key!r}; its parameters: {known}")
        if value is None and rule.defaults[key] is None:
            resolved[key] = None
            continue
        try:
            resolved[key] = _kind_of(key, rule.defaults[key])(value)
        except ValueError as exc:
            raise ValueError(f"{rule.name}.{key} {exc}") from None
    for key in _REQUIRED.get(rule.name, ()):
        if resolved[key] is None:
            raise ValueError(f"{rule.name} needs {key}")
    return resolved


def _custom_parameters(given: Mapping[str, Any]) -> dict[str, Any]:
    """A custom rule's parameters: ``source`` (a relative ``.py`` path without ``..``),
    ``rule_to_invoke`` (a class name), and at most 100 more, each a printable string."""
    if len(given) > _CUSTOM_PARAMETERS:
        raise ValueError(f"{CUSTOM} takes at most {_CUSTOM_PARAMETERS} parameters")
    resolved: dict[str, Any] = {}
    for key, value in given.items():
        if not isinstance(key, str) or not _IDENTIFIER.match(key):
            raise ValueError(f"{CUSTOM}: parameter name {str(key)[:64]!r} is not an identifier")
        text = str(value).lower() if isinstance(value, bool) else value
        if isinstance(text, int | float):
            text = str(text)
        try:
            resolved[key] = _text(text)
        except ValueError as exc:
            raise ValueError(f"{CUSTOM}.{key} {exc}") from None
    for key in ("source", "rule_to_invoke"):
        if key not in resolved:
            raise ValueError(f"{CUSTOM} needs {key}")
    source = resolved["source"]
    parts = source.replace("\\", "/").split("/")
    if source.startswith("/") or ".." in parts or not source.endswith(".py"):
        raise ValueError(
            f"{CUSTOM}.source must be a .py file inside the job's source folder, not {source!r}"
        )
    if not _IDENTIFIER.match(resolved["rule_to_invoke"]):
        raise ValueError(f"{CUSTOM}.rule_to_invoke must be a class name")
    return resolved
