"""Where the hook writes and where its JSON config is, inside a trainops job or by hand.

TensorBoard: as smdebug, ``tensorboard_dir`` if given, else ``<out_dir>/tensorboard`` with
``export_tensorboard``, else none; in a job with a ``TensorBoardOutputConfig`` (its
``tensorboardoutputconfig.json``, SageMaker's file), that file's ``LocalPath`` unless the hook's
parameters say otherwise.

A SageMaker path (``/opt/ml/...``) in the hook's config is re-rooted onto the host's tree
where the script does not see a literal ``/opt/ml`` (trainops roots each host's tree in its
own directory and says where through the ``SM_*`` variables).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainops.debugger.config import CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE
from trainops.debugger.exceptions import DebugConfigError

__all__ = ["config_file", "job_tensorboard_dir", "out_dir_for", "tensorboard_dir_for"]

_OPT_ML = "/opt/ml"
TENSORBOARD_CONFIG_ENV = "TENSORBOARD_CONFIG_FILE_PATH"  # smdebug's name
TENSORBOARD_CONFIG_FILE = "/opt/ml/input/config/tensorboardoutputconfig.json"
_MAX_TENSORBOARD_CONFIG = 64 << 10


def _tree_root() -> Path | None:
    """The host tree's root as the script sees it, if in a job (``$SAGEMAKER_BASE_DIR``, or
    ``$SM_OUTPUT_DIR/..``)."""
    base = os.environ.get("SAGEMAKER_BASE_DIR")
    if base:
        return Path(base)
    output = os.environ.get("SM_OUTPUT_DIR")
    return Path(output).parent if output else None


def _rerooted(path: str) -> str:
    root = _tree_root()
    if root is None or str(root) == _OPT_ML or not path.startswith(_OPT_ML + "/"):
        return path
    return str(root / path[len(_OPT_ML) + 1 :])


def config_file() -> str:
    """``$SMDEBUG_CONFIG_FILE_PATH``, else ``debughookconfig.json`` in ``$SM_INPUT_CONFIG_DIR``,
    else SageMaker's path (re-rooted in a trainops job)."""
    explicit = os.environ.get(CONFIG_FILE_ENV)
    if explicit:
        return explicit
    config_dir = os.environ.get("SM_INPUT_CONFIG_DIR")
    if config_dir:
        return os.path.join(config_dir, os.path.basename(DEFAULT_CONFIG_FILE))
    return _rerooted(DEFAULT_CONFIG_FILE)


def out_dir_for(out_dir: str | os.PathLike[str] | None) -> str:
    """The directory to write under: ``out_dir``, or the job's ``output/tensors``."""
    if out_dir is not None:
        text = os.fspath(out_dir)
        if not text:
            raise ValueError("out_dir must not be empty")
        if text.startswith("file://"):
            text = text[len("file://") :]
        elif "://" in text:
            raise ValueError(
                f"out_dir must be a local directory, not {text!r} (a job syncs its tensors to "
                "the debug-output prefix)"
            )
        return _rerooted(text)
    root = _tree_root()
    if root is None:
        raise ValueError(
            "Hook(out_dir=...) is required outside a training job (no SM_OUTPUT_DIR is set)"
        )
    return str(root / "output" / "tensors")


def tensorboard_dir_for(export: bool, tensorboard_dir: str | None, out_dir: str) -> str | None:
    """smdebug's ``get_tensorboard_dir``: the given directory (re-rooted), else
    ``<out_dir>/tensorboard`` when exporting, else None."""
    if tensorboard_dir is not None:
        text = os.fspath(tensorboard_dir)
        if not text or "://" in text:
            raise ValueError(f"tensorboard_dir must be a local directory, not {text!r}")
        return _rerooted(text)
    return os.path.join(out_dir, "tensorboard") if export else None


def job_tensorboard_dir() -> str | None:
    """The job's TensorBoard directory from ``tensorboardoutputconfig.json``
    (``$TENSORBOARD_CONFIG_FILE_PATH``, else beside the hook's config, else SageMaker's path);
    None where there is no such file."""
    path = os.environ.get(TENSORBOARD_CONFIG_ENV) or os.path.join(
        os.path.dirname(config_file()), os.path.basename(TENSORBOARD_CONFIG_FILE)
    )
    try:
        with open(path, "rb") as stream:
            raw = stream.read(_MAX_TENSORBOARD_CONFIG + 1)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise DebugConfigError(f"{path}: cannot read it ({err.strerror})") from None
    try:
        local = json.loads(raw).get("LocalPath") if len(raw) <= _MAX_TENSORBOARD_CONFIG else None
    except (ValueError, AttributeError, RecursionError):
        local = None
    if not isinstance(local, str) or not local:
        raise DebugConfigError(f"{path}: LocalPath must be a non-empty string")
    return _rerooted(local)
