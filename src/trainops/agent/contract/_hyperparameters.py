"""Hyperparameters the way the SageMaker SDK writes them and the training toolkit reads them.

The SDK's framework estimators JSON-encode every value (``"adam"`` is stored as ``"\\"adam\\""``)
and add a few ``sagemaker_*`` entries; the toolkit ``json.loads`` each value back (keeping the
raw string when that fails), splits the ``sagemaker_*`` ones off, and turns the rest into sorted
command-line arguments and ``SM_*`` variables. This module reproduces both sides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trainops.protocol import RESERVED_HYPERPARAMETERS

__all__ = [
    "SAGEMAKER_HYPERPARAMETERS",
    "decode_hyperparameters",
    "encode_hyperparameters",
    "split_hyperparameters",
    "to_cmd_args",
    "to_env_vars",
]

SAGEMAKER_PREFIX = "sagemaker_"
DEFAULT_LOG_LEVEL = 20

# The toolkit's reserved list; the same set trainops.spec rejects in user specs.
SAGEMAKER_HYPERPARAMETERS = RESERVED_HYPERPARAMETERS


def encode_hyperparameters(
    user: Mapping[str, Any],
    *,
    program: str,
    submit_directory: str,
    job_name: str,
    region: str,
    log_level: int = DEFAULT_LOG_LEVEL,
) -> dict[str, str]:
    """The ``hyperparameters.json`` content: every value JSON-encoded, as the SDK sends it."""
    values: dict[str, Any] = dict(user)
    values.update(
        sagemaker_program=program,
        sagemaker_submit_directory=submit_directory,
        sagemaker_container_log_level=log_level,
        sagemaker_job_name=job_name,
        sagemaker_region=region,
    )
    return {str(key): json.dumps(value) for key, value in values.items()}


def decode_hyperparameters(raw: Mapping[str, str]) -> dict[str, Any]:
    """Read values back as the toolkit does: ``json.loads``, or the raw string if that fails
    (a value nested past the decoder's recursion too: ``[`` repeated 2,500 times is text)."""
    decoded: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            decoded[key] = json.loads(value)
        except (ValueError, TypeError, RecursionError):
            decoded[key] = value
    return decoded


def split_hyperparameters(
    values: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(user, framework, sagemaker)``: the toolkit's ``SM_HPS``, ``SM_FRAMEWORK_PARAMS`` and all
    ``sagemaker_*`` or reserved entries."""
    sagemaker = {
        k: v
        for k, v in values.items()
        if k in SAGEMAKER_HYPERPARAMETERS or k.startswith(SAGEMAKER_PREFIX)
    }
    user = {k: v for k, v in values.items() if k not in sagemaker}
    framework = {k: v for k, v in sagemaker.items() if k not in SAGEMAKER_HYPERPARAMETERS}
    return user, framework, sagemaker


def to_cmd_args(mapping: Mapping[str, Any]) -> list[str]:
    """Sorted ``--key value`` pairs (``-k`` for one-character keys), as ``mapping.to_cmd_args``."""
    args: list[str] = []
    for key in sorted(mapping):
        name = _decode(key)
        args.append((f"--{name}" if len(name) > 1 else f"-{name}") if name else "")
        args.append(_arg_value(mapping[key]))
    return args


def to_env_vars(mapping: Mapping[str, Any]) -> dict[str, str]:
    """``SM_<KEY>`` variables with the toolkit's value encoding (``mapping.to_env_vars``)."""
    return {(f"SM_{str(k).upper()}" if k else ""): _env_value(v) for k, v in mapping.items()}


def _arg_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return _decode(value)


def _env_value(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("latin1")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _decode(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin1")
    return str(value)
