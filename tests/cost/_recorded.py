"""A spot job (2 x ml.p3.2xlarge) twice interrupted, recorded through the real store (tests/cost/test_spot_cost.py
works out every figure of it by hand); the CLI's tests read the same record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops.spec import JobSpec
from trainops.store import CheckpointRecord, MetadataStore

NAME = "spot-job"
TIMELINE = [
    ("Downloading", 1010.0),
    ("Training", 1020.0),
    ("Interrupted", 1620.0),
    ("Pending", 1650.0),
    ("Starting", 1750.0),
    ("Downloading", 1760.0),
    ("Training", 1780.0),
    ("Interrupted", 2380.0),
    ("Pending", 2390.0),
    ("Starting", 2400.0),
    ("Training", 2420.0),
    ("Uploading", 3020.0),
]
# (attempt, host, kind, at, newest_write, write_seconds)
CHECKPOINTS = [
    (1, "algo-1", "synced", 1325.0, 1320.0, 4.0),
    (1, "algo-2", "synced", 1326.0, 1320.0, 4.0),
    (1, "algo-1", "synced", 1565.0, 1560.0, 5.0),
    (1, "algo-2", "sync_failed", 1566.0, None, None),
    (2, "algo-1", "restored", 1770.0, 1560.0, None),
    (2, "algo-2", "restored", 1770.5, 1320.0, None),
    (2, "algo-1", "synced", 2085.0, 2080.0, 6.0),
    (2, "algo-1", "synced", 2388.0, 2385.0, 2.0),
    # algo-2's last sync left a half-written file behind: it saved nothing, took no measure
    (2, "algo-2", "sync_incomplete", 2389.0, 2386.0, 50.0),
]


def open_store(path: Path, *, spot: bool = True) -> MetadataStore:
    """A store at ``path`` holding the job as it was created (Starting at 1000): a spot job
    with a checkpoint location, or (``spot=False``) the same on-demand."""
    opened = MetadataStore(path)
    spot_fields: dict[str, Any] = {
        "use_spot_instances": True,
        "stopping_condition": {"max_wait_time_in_seconds": 86400},
        "checkpoint": {"uri": "file:///ckpt/"},
    }
    spec = JobSpec(entry_point="train.py", instance_type="ml.p3.2xlarge", instance_count=2,
                   **(spot_fields if spot else {}))  # fmt: skip
    opened.create_job(name=NAME, spec=spec.view(), code_uri="file:///c.tar.gz",
                      output_prefix="file:///out", max_attempts=1, status="InProgress",
                      secondary_status="Starting", message="Preparing", now=1000.0)  # fmt: skip
    return opened


def record(until: float, store: MetadataStore) -> None:
    """The timeline and checkpoints up to ``until`` (the store's job as it was then)."""
    for status, at in TIMELINE:  # each transition ends where the next starts
        if at <= until:
            store.set_secondary(NAME, status, f"{status} at {at:.0f}", at)
    for attempt, host, kind, at, newest, write in CHECKPOINTS:
        if at <= until:
            store.add_checkpoint(CheckpointRecord(NAME, attempt, host, kind, at, 3, 4096,  # type: ignore[arg-type]
                                                  newest, write, 1.0, None))  # fmt: skip


def finish(store: MetadataStore, **fields: object) -> None:
    record(3030.0, store)
    store.set_secondary(NAME, "Completed", "done", 3030.0, final=True, status="Completed",
                        training_end_time=3030.0, training_seconds=2030, **fields)  # fmt: skip
