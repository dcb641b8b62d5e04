"""A job row in a store, for the store's own tests that need one to hang other rows on."""

from __future__ import annotations

from tests.control._harness import job_spec
from trainops.spec import JobSpec
from trainops.store import MetadataStore


def add_job(store: MetadataStore, name: str, *, message: str = "Starting the training job") -> None:
    """Record job ``name`` (a small valid spec), InProgress and Starting."""
    store.create_job(
        name=name,
        spec=JobSpec(**job_spec()).view(),
        code_uri="file:///code.tar.gz",
        output_prefix=f"file:///out/{name}",
        max_attempts=1,
        status="InProgress",
        secondary_status="Starting",
        message=message,
        now=1.0,
    )
