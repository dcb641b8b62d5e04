"""The names and units of every profiler series: what recorders write and what readers expect.

One table per series kind (see ``_layout`` for where each lives). A recorder writes the columns
it has (``time`` first, Unix seconds, then any of the names below in any order; a reader aligns
them by name); a column it cannot measure is left out, never written as zeros. Rules, the
report and TensorBoard read columns by these names, so a new column is added here first.

System series (``system/<host>/``, one row per sample of the monitor's interval):

- ``cpu``: utilization of the whole host, percent of all cores (0-100);
- ``cpu<N>``: utilization of core N (``cpu0``, ``cpu1``...), percent of that core;
- ``iowait``: percent of CPU time spent waiting for I/O over all cores (SageMaker's
  ``I/OWaitPercentage``);
- ``memory``: memory used, percent of the host's total (SageMaker's ``MemoryUsedPercent``);
- ``memory_bytes``: memory used, bytes (total minus available);
- ``disk_read``, ``disk_write``: bytes per second read from / written to block devices;
- ``net_rx``, ``net_tx``: bytes per second received / sent on every interface but loopback;
- ``gpu<N>``: utilization of GPU N, percent (NVML);
- ``gpu<N>_memory``: memory used on GPU N, percent of its total;
- ``gpu<N>_memory_bytes``: memory used on GPU N, bytes.

Step series (``framework/steps/<host>/rank-<r>/``, one row per training or evaluation step):

- ``time``: when the step began (Unix seconds);
- ``step``: the step's number on this rank, from 0 (eval steps are numbered on their own);
- ``mode``: :data:`MODE_TRAIN` or :data:`MODE_EVAL` (``model.training`` at the step's forward);
- ``duration``: seconds from the step's start to its end;
- ``data``, ``forward``, ``backward``, ``optimizer``: seconds of each phase within the step
  (waiting for the next batch, the outermost module's forward, from its end to the optimizer,
  the optimizer's step); NaN where the phase was not seen;
- ``samples``: the batch's size where it could be told (first dimension of the batch), else NaN.

Dataloader series (``framework/dataloader/<host>/rank-<r>/``, one row per batch fetched while
a dataloader profiling window is open, plus one per iterator started):

- ``time``: when the fetch began; ``fetch``: seconds the training process waited for it;
- ``workers``: the DataLoader's ``num_workers``; ``batch``: index of the batch in its epoch;
- ``step``: the step counter when the batch was fetched.

The host's ``meta/<host>.json`` (written by the system monitor) carries the keys of
:data:`META_KEYS`.
"""

from __future__ import annotations

__all__ = [
    "DATALOADER_COLUMNS",
    "META_KEYS",
    "MODE_EVAL",
    "MODE_TRAIN",
    "STEP_COLUMNS",
    "SYSTEM_COLUMNS",
    "UNITS",
    "core_column",
    "gpu_column",
    "gpu_memory_bytes_column",
    "gpu_memory_column",
    "numbered",
]

MODE_TRAIN = 0.0
MODE_EVAL = 1.0

SYSTEM_COLUMNS = (
    "time",
    "cpu",
    "iowait",
    "memory",
    "memory_bytes",
    "disk_read",
    "disk_write",
    "net_rx",
    "net_tx",
)
STEP_COLUMNS = (
    "time",
    "step",
    "mode",
    "duration",
    "data",
    "forward",
    "backward",
    "optimizer",
    "samples",
)
DATALOADER_COLUMNS = ("time", "fetch", "workers", "batch", "step")

#: Keys of ``meta/<host>.json``: host name, instance type, ``cores`` (usable by the job),
#: ``memory_bytes``, ``gpus`` (a list of ``{"index", "name", "memory_bytes"}``, empty without
#: NVML or GPUs), ``gpu_status`` (one line: "nvml", or why GPU metrics are off), the monitor's
#: ``interval_ms``, the ``attempt``, and ``started`` (Unix seconds the monitor began).
META_KEYS = (
    "host",
    "instance_type",
    "cores",
    "memory_bytes",
    "gpus",
    "gpu_status",
    "interval_ms",
    "attempt",
    "started",
)

#: Unit of each column; numbered columns (``cpu3``, ``gpu0_memory``) take their family's.
UNITS = {
    "time": "s (Unix)",
    "cpu": "%",
    "cpu<N>": "%",
    "iowait": "%",
    "memory": "%",
    "memory_bytes": "B",
    "disk_read": "B/s",
    "disk_write": "B/s",
    "net_rx": "B/s",
    "net_tx": "B/s",
    "gpu<N>": "%",
    "gpu<N>_memory": "%",
    "gpu<N>_memory_bytes": "B",
    "step": "",
    "mode": "0 train, 1 eval",
    "duration": "s",
    "data": "s",
    "forward": "s",
    "backward": "s",
    "optimizer": "s",
    "samples": "",
    "fetch": "s",
    "workers": "",
    "batch": "",
}


def core_column(index: int) -> str:
    return f"cpu{index}"


def gpu_column(index: int) -> str:
    return f"gpu{index}"


def gpu_memory_column(index: int) -> str:
    return f"gpu{index}_memory"


def gpu_memory_bytes_column(index: int) -> str:
    return f"gpu{index}_memory_bytes"


def numbered(columns: list[str], family: str) -> dict[int, str]:
    """The numbered columns of ``family`` (``"cpu"``, ``"gpu"``, ``"gpu_memory"``) among
    ``columns``, by number: ``numbered(["cpu", "cpu0", "cpu1"], "cpu") == {0: "cpu0", 1:
    "cpu1"}``."""
    head, _, tail = family.partition("_")
    suffix = f"_{tail}" if tail else ""
    found: dict[int, str] = {}
    for name in columns:
        if not name.startswith(head) or not name.endswith(suffix):
            continue
        middle = name[len(head) : len(name) - len(suffix)] if suffix else name[len(head) :]
        if middle.isdigit():
            found[int(middle)] = name
    return dict(sorted(found.items()))
