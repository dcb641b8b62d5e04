"""Reading a home's jobs while no server runs: straight from its store, no control plane started.

``trainops jobs``, ``describe``, ``logs`` (without ``-f``), ``metrics`` and ``cost`` only read. With a
server configured or running for the home they ask it; with none, a job cannot move on (nothing
collects its hosts' events), so what the store holds is the whole truth, and reading it takes a
tenth of the time an embedded server takes to start (its backend, its threads, its recovery
pass). The answers are the API's own: the same views of the same records (server/_views.py).

One case still needs a control plane: a job the store shows as not ended, which a server that
died left behind. Its agents may still be running with events to hand over, so
:func:`read_jobs` starts an embedded server then (it adopts them, as any new server does).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from trainops._errors import JobNotFoundError
from trainops._home import lock_is_held
from trainops._settings import Settings
from trainops.client._connect import connect

if TYPE_CHECKING:
    from trainops.store import JobRecord, MetadataStore

__all__ = ["JobReader", "StoreReader", "read_jobs"]

# The primary statuses of a job that has not ended (trainops.control.PrimaryStatus; the control
# plane is not imported for them: it is what this module spares the command).
_NOT_ENDED = ("InProgress", "Stopping")


class JobReader(Protocol):
    """What reading commands ask of a server (or of the store, with none running)."""

    def list_jobs(
        self,
        status: str | Sequence[str] | None = None,
        name_contains: str | None = None,
        limit: int = 50,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
    ) -> list[dict[str, Any]]: ...

    def describe(self, name: str, shape: str = "rest") -> dict[str, Any]: ...

    def logs(
        self,
        name: str,
        after: int = 0,
        host: str | None = None,
        limit: int = 1000,
        wait: float = 0,
        *,
        runs: bool = False,
    ) -> dict[str, Any]: ...

    def metrics(self, name: str, metric_name: str | None = None) -> list[dict[str, Any]]: ...

    def job_cost(
        self,
        name: str,
        interruptions_per_hour: float | None = None,
        checkpoint_seconds: float | None = None,
    ) -> dict[str, Any]: ...


@contextmanager
def read_jobs(settings: Settings | None = None) -> Iterator[JobReader]:
    """A :class:`JobReader`: the configured or running server's client, else the home's store
    read directly (:class:`StoreReader`), else (a job not ended, no server) an embedded server."""
    settings = settings or Settings.load()
    if not settings.server_url and not lock_is_held(settings.home):
        reader = StoreReader.open(settings)
        if reader is not None:
            try:
                yield reader
            finally:
                reader.close()
            return
    with connect(settings) as client:
        yield client


class StoreReader:
    """The public API's reading answers, computed from the home's store in this process."""

    def __init__(self, store: MetadataStore | None, settings: Settings) -> None:
        self._store = store
        self._settings = settings

    @classmethod
    def open(cls, settings: Settings) -> StoreReader | None:
        """A reader of the home's store, or None where a job has not ended (a control plane
        should adopt it first). A home without a store yet has no jobs: nothing is created."""
        if not settings.db_path.exists():
            return cls(None, settings)
        from trainops.store import MetadataStore

        store = MetadataStore(settings.db_path)
        if store.active_jobs(_NOT_ENDED):
            store.close()
            return None
        return cls(store, settings)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def list_jobs(
        self,
        status: str | Sequence[str] | None = None,
        name_contains: str | None = None,
        limit: int = 50,
        created_after: datetime | str | None = None,
        created_before: datetime | str | None = None,
    ) -> list[dict[str, Any]]:
        from trainops.server._views import summary

        if self._store is None:
            return []
        jobs = self._store.list_jobs(
            statuses=[status] if isinstance(status, str) else list(status or []),
            name_contains=name_contains,
            created_after=_seconds(created_after),
            created_before=_seconds(created_before),
            limit=limit,
        )
        return [summary(job) for job in jobs]

    def describe(self, name: str, shape: str = "rest") -> dict[str, Any]:
        from trainops.server._views import describe
        from trainops.server.aws._sagemaker import cli_describe

        store, job = self._job(name)
        view = cli_describe if shape == "sagemaker" else describe
        return view(store, job, self._settings, time.time())

    def logs(
        self,
        name: str,
        after: int = 0,
        host: str | None = None,
        limit: int = 1000,
        wait: float = 0,
        *,
        runs: bool = False,
    ) -> dict[str, Any]:
        """A page as ``GET .../logs`` gives it; ``wait`` is moot: every job here has ended."""
        from trainops.server._views import log_page

        store, job = self._job(name)  # an unknown job is an error before anything is read
        chunks = store.log_chunks(name, after=after, host=host, limit=limit)
        return log_page(chunks, after, job, runs=runs)

    def metrics(self, name: str, metric_name: str | None = None) -> list[dict[str, Any]]:
        from trainops.server._views import metric_points

        store, _ = self._job(name)
        points: list[dict[str, Any]] = metric_points(store, name, metric_name)["metrics"]
        return points

    def job_cost(
        self,
        name: str,
        interruptions_per_hour: float | None = None,
        checkpoint_seconds: float | None = None,
    ) -> dict[str, Any]:
        """The cost advice as ``GET .../cost`` gives it."""
        from trainops.cost import job_spot_cost

        store, _ = self._job(name)
        own = self._settings.spot
        now = time.time()
        return job_spot_cost(
            store, name, own, now, interruptions_per_hour, checkpoint_seconds
        ).to_json()

    def _job(self, name: str) -> tuple[MetadataStore, JobRecord]:
        job = None if self._store is None else self._store.get_job(name)
        if self._store is None or job is None:
            raise JobNotFoundError(f"no job named {name!r}")
        return self._store, job


def _seconds(when: datetime | str | None) -> float | None:
    if when is None or when == "":
        return None
    moment = when if isinstance(when, datetime) else datetime.fromisoformat(when)
    # As the server reads it: a time that does not say its zone is UTC.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
