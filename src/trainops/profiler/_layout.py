"""Where profiler data lives: one tree, the same on a host's disk and under the object-store prefix.

On each host the tree is ``FrameworkProfile.local_path`` (default ``/opt/ml/output/profiler``,
re-rooted in the host's job tree); a sidecar mirrors it, as files are completed, to the job's
profiler prefix (``profiler_config.s3_output_path``, default ``<output prefix>/profiler-output``).
Paths below are relative to either root::

    meta/<host>.json                                   the host: cores, memory, GPUs, instance type
    system/<host>/<attempt>-<seq>.tsc                  system metrics (``_series`` chunks)
    framework/steps/<host>/rank-<r>/<attempt>-<seq>.tsc     step timings and phases
    framework/dataloader/<host>/rank-<r>/<attempt>-<seq>.tsc per-batch fetch times
    framework/detailed/<host>/rank-<r>/<name>.pt.trace.json[.gz]   torch.profiler traces
    framework/python/<host>/rank-<r>/<window>/python_stats{.prof,.json,.html}
    tensorboard is not here: it has its own config and prefix

The script's processes find the local root in ``TRAINOPS_PROFILER_DIR`` and the job's profiler
settings in ``TRAINOPS_PROFILER_CONFIG`` (a JSON file, ``profilerconfig.json`` in
``input/config/``, as SageMaker's toolkit reads it).
"""

from __future__ import annotations

from pathlib import PurePosixPath

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DIR_ENV",
    "chunk_prefix",
    "dataloader_dir",
    "detailed_dir",
    "meta_path",
    "profiler_prefix",
    "python_dir",
    "steps_dir",
    "system_dir",
]

DIR_ENV = "TRAINOPS_PROFILER_DIR"
CONFIG_ENV = "TRAINOPS_PROFILER_CONFIG"
CONFIG_FILE = "profilerconfig.json"
PREFIX_NAME = "profiler-output"


def profiler_prefix(s3_output_path: str | None, output_prefix: str) -> str:
    """The job's profiler prefix: the configured one, else ``<output prefix>/profiler-output``."""
    if s3_output_path:
        return s3_output_path.rstrip("/")
    return f"{output_prefix.rstrip('/')}/{PREFIX_NAME}"


def chunk_prefix(attempt: int) -> str:
    """The file-name prefix of one attempt's chunks (a retried job keeps both attempts')."""
    return f"{attempt}-"


def meta_path(host: str) -> PurePosixPath:
    return PurePosixPath("meta", f"{host}.json")


def system_dir(host: str) -> PurePosixPath:
    return PurePosixPath("system", host)


def _framework(kind: str, host: str, rank: int) -> PurePosixPath:
    return PurePosixPath("framework", kind, host, f"rank-{rank}")


def steps_dir(host: str, rank: int) -> PurePosixPath:
    return _framework("steps", host, rank)


def dataloader_dir(host: str, rank: int) -> PurePosixPath:
    return _framework("dataloader", host, rank)


def detailed_dir(host: str, rank: int) -> PurePosixPath:
    return _framework("detailed", host, rank)


def python_dir(host: str, rank: int) -> PurePosixPath:
    return _framework("python", host, rank)
