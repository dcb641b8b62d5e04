"""A store holding one running job, ``job-a``, with one host: where the ingest tests start."""

from __future__ import annotations

from pathlib import Path

from trainops.spec import JobSpec
from trainops.store import MetadataStore, NewHost


def store_with_running_job(path: Path, attempt: int = 1, host: str = "algo-1") -> MetadataStore:
    """A store at ``path`` with ``job-a`` InProgress and ``host`` in its ``attempt``."""
    opened = MetadataStore(path)
    opened.create_job(
        name="job-a",
        spec=JobSpec(entry_point="train.py").view(),
        code_uri="file:///code.tar.gz",
        output_prefix="file:///out/job-a",
        max_attempts=1,
        status="InProgress",
        secondary_status="Starting",
        message="",
        now=100.0,
    )
    opened.create_hosts("job-a", attempt, [NewHost(host=host, root="/r", state_dir="/s")])
    return opened
