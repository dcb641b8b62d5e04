"""Jobs for the UI tests: many finished ones written straight into a home's store (the list a
user with a long history has), and the hostile text that must show as text everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.control._harness import ControlPlane
from tests.tuner.test_service import create, tuning_config, wait_tuning
from trainops.spec import JobSpec
from trainops.store import MetadataStore

#: Markup and script a job's own text may hold (a failure reason, a hyperparameter, a metric
#: name): each page must show it as text, and nothing of it may run or become an element.
HOSTILE = (
    '<i id="injected">x</i><script>window.injected = 1</script>'
    '<img src="/x" onerror="window.injected = 2">"\' & </td></table>'
)


def finished_jobs(home: Path, count: int, prefix: str = "old") -> list[str]:
    """``count`` Completed jobs in ``home``'s store, created a second apart (newest last)."""
    store = MetadataStore(home / "trainops.db")
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    spec = JobSpec(entry_point="train.py", instance_type="ml.m5.large").view()
    try:
        for i, name in enumerate(names):
            store.create_job(
                name=name,
                spec=spec,
                code_uri="file:///code.tar.gz",
                output_prefix=f"file:///out/{name}",
                max_attempts=1,
                status="Completed",
                secondary_status="Completed",
                message="done",
                now=1_700_000_000.0 + i,
            )
    finally:
        store.close()
    return names


def hostile_tuning(plane: ControlPlane, name: str = "tiny", jobs: int = 3) -> dict[str, Any]:
    """A small real tuning job on ``plane`` (fake trials), one of whose categorical values is
    :data:`HOSTILE`; its describe once it has Completed."""
    config = tuning_config(name, jobs=jobs, parallel=2)
    config["hyperparameter_ranges"]["optimizer"] = ["sgd", HOSTILE]
    create(plane, config)
    return wait_tuning(plane, name, "Completed")
