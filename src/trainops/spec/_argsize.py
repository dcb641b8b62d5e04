"""How big the script's arguments and environment get, checked before a job is accepted.

The agent hands the hyperparameters to the script five times over (the training toolkit's
contract): as ``--name value`` arguments, as ``SM_HP_<NAME>`` variables, and inside the
``SM_HPS``, ``SM_USER_ARGS`` and ``SM_TRAINING_ENV`` JSON variables. Linux refuses to start a
process when one argument or ``NAME=value`` string is longer than ``MAX_ARG_STRLEN`` (128 KiB),
or when all of them (with their pointers) exceed ``ARG_MAX``: exec fails with E2BIG, long after
the job was accepted. This module computes those sizes with the agent's encoding rules
(``tests/spec`` checks them against the environment the agent really builds), so such a spec is
refused up front, naming its biggest hyperparameters.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_ARG_STRLEN", "argument_sizes", "argument_text", "check_argument_size"]

MAX_ARG_STRLEN = 32 * 4096  # Linux: one argument or NAME=value string, NUL included
POINTER = 8  # each string also costs its argv/envp pointer
# SM_TRAINING_ENV's fields besides the hyperparameters: paths, hosts, channels, resource config.
TRAINING_ENV_RESERVE = 16 * 1024
# trainops' other variables and argv[0..1], plus the largest `environment` a spec may declare
# (100 variables of 512-character names and values).
FIXED_RESERVE = 64 * 1024 + 100 * (512 + 512 + 2 + POINTER)
ARG_MAX_FALLBACK = 2 * 1024 * 1024


def argument_sizes(hyperparameters: Mapping[str, Any]) -> dict[str, int]:
    """Bytes the hyperparameters add: each large JSON variable, and ``total`` (with pointers)."""
    hps_json = _json(dict(hyperparameters))
    args = _cmd_args(hyperparameters)
    sizes = {
        "SM_HPS": _env_size("SM_HPS", hps_json),
        "SM_USER_ARGS": _env_size("SM_USER_ARGS", _json(args)),
        "SM_TRAINING_ENV": _env_size("SM_TRAINING_ENV", hps_json) + TRAINING_ENV_RESERVE,
    }
    args_size = sum(_bytes(arg) + 1 + POINTER for arg in args)
    hp_vars = sum(
        _env_size(f"SM_HP_{key.upper()}", _env_value(value)) + POINTER
        for key, value in hyperparameters.items()
    )
    sizes["total"] = args_size + hp_vars + sum(size + POINTER for size in sizes.values())
    return sizes


def check_argument_size(
    hyperparameters: Mapping[str, Any],
    *,
    arg_max: int | None = None,
    inherited: Mapping[str, str] | None = None,
) -> None:
    """Raise ``ValueError`` when the script could not be started with these hyperparameters.

    ``arg_max`` defaults to this machine's ``ARG_MAX``; ``inherited`` (default ``os.environ``) is
    the environment the agent passes on to the script.
    """
    sizes = argument_sizes(hyperparameters)
    too_long = [
        f"{name} ({size:,} bytes)"
        for name, size in sizes.items()
        if name != "total" and size > MAX_ARG_STRLEN
    ]
    if too_long:
        raise ValueError(
            f"too large to pass to the script: {', '.join(too_long)} would exceed the "
            f"{MAX_ARG_STRLEN:,}-byte limit Linux puts on one variable (MAX_ARG_STRLEN; the "
            f"script would fail to start with E2BIG); {_largest(hyperparameters)}"
        )
    limit = arg_max or _arg_max()
    env = os.environ if inherited is None else inherited
    inherited_size = sum(_env_size(k, v) + POINTER for k, v in env.items())
    total = sizes["total"] + inherited_size + FIXED_RESERVE
    if total > limit:
        raise ValueError(
            f"too large to pass to the script: its arguments and environment would be about "
            f"{total:,} bytes ({inherited_size:,} of them inherited from this environment), over "
            f"this machine's ARG_MAX of {limit:,} bytes; {_largest(hyperparameters)}"
        )


def _largest(hyperparameters: Mapping[str, Any], count: int = 3) -> str:
    encoded = {key: _bytes(_env_value(value)) for key, value in hyperparameters.items()}
    top = sorted(encoded, key=lambda key: (-encoded[key], key))[:count]
    names = ", ".join(f"{key!r} ({encoded[key]:,} bytes)" for key in top)
    return (
        f"{len(encoded)} hyperparameters of {sum(encoded.values()):,} bytes in all, the largest "
        f"{names}; pass big values in a file (in source_dir or a channel) instead"
    )


def _arg_max() -> int:
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (OSError, ValueError):
        return ARG_MAX_FALLBACK
    return value if value > 0 else ARG_MAX_FALLBACK


def _env_size(name: str, value: str) -> int:
    return _bytes(name) + 1 + _bytes(value) + 1


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


# The agent's (the toolkit's) encodings: agent/contract/_hyperparameters.py to_cmd_args and
# to_env_vars.
def _cmd_args(mapping: Mapping[str, Any]) -> list[str]:
    args: list[str] = []
    for key in sorted(mapping):
        args.append(f"--{key}" if len(key) > 1 else f"-{key}")
        args.append(argument_text(mapping[key]))
    return args


def argument_text(value: Any) -> str:
    """The command-line argument the agent makes of a hyperparameter's value."""
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
