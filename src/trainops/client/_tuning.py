"""Tuning jobs from the client side: submit one (its trials' code packed and uploaded once),
read them from a server or, with none running, from the home's store, and their trials as
the rows of SageMaker's HyperparameterTuningJobAnalytics (``trainops tuning export``).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainops._errors import TUNING_JOB, JobNotFoundError, SpecError
from trainops._home import lock_is_held
from trainops._settings import Settings
from trainops.client._connect import connect
from trainops.client._http import Client
from trainops.client._progress import TransferBar
from trainops.client._submit import code_uri_for, pack_source
from trainops.spec._lines import read_spec_text, read_spec_yaml, with_lines
from trainops.storage import join_uri, store_for

if TYPE_CHECKING:
    from trainops.tuning import TuningJobConfig

__all__ = [
    "ANALYTICS_COLUMNS",
    "TuningReader",
    "TuningStoreReader",
    "analytics_rows",
    "new_tuning_job_name",
    "read_tuning",
    "submit_tuning",
    "submit_tuning_config",
]

#: The columns HyperparameterTuningJobAnalytics.dataframe() has besides the tuned ones.
ANALYTICS_COLUMNS = (
    "TrainingJobName",
    "TrainingJobStatus",
    "FinalObjectiveValue",
    "TrainingStartTime",
    "TrainingEndTime",
    "TrainingElapsedTimeSeconds",
)


def new_tuning_job_name(now: float | None = None) -> str:
    """``tune-YYMMDD-HHMMSS-mmm`` (23 characters: within SageMaker's 32)."""
    moment = time.time() if now is None else now
    stamp = time.strftime("%y%m%d-%H%M%S", time.gmtime(moment))
    return f"tune-{stamp}-{int(moment * 1000) % 1000:03d}"


def submit_tuning(client: Client, path: Path, settings: Settings, *, progress: bool = True) -> str:
    """Read and check the tuning config at ``path``, upload its training job's code under
    ``<output>/<tuning job>/source/`` and create the tuning job; returns its name."""
    from trainops.tuning import load_tuning_config

    config = load_tuning_config(path)
    try:
        return submit_tuning_config(
            client, config, settings, base_dir=path.resolve().parent, progress=progress
        )
    except SpecError as exc:  # e.g. a warm-start parent the server does not have
        raise _refused(exc, path) from None


def submit_tuning_config(
    client: Client,
    config: TuningJobConfig,
    settings: Settings,
    *,
    base_dir: Path,
    progress: bool = True,
) -> str:
    """Create the tuning job ``config`` declares (named ``tune-<time>`` without a name), its
    training job's code packed from ``base_dir`` and uploaded once; returns its name."""
    name = config.tuning_job_name or new_tuning_job_name()
    job = config.training_job
    output = job.output_path or str(client.info()["default_output_uri"])
    code_uri = code_uri_for(join_uri(output, name))
    with tempfile.TemporaryDirectory(prefix="trainops-source-") as tmp:
        archive = pack_source(job, base_dir, Path(tmp) / "sourcedir.tar.gz", settings)
        with TransferBar(archive.stat().st_size, "uploading source", enabled=progress) as bar:
            store_for(code_uri, settings).upload(archive, code_uri, on_bytes=bar)
    fields = config.model_dump(mode="json", exclude_none=True) | {"tuning_job_name": name}
    client.create_tuning_job(fields, code_uri)
    return name


def _refused(exc: SpecError, path: Path) -> SpecError:
    """The server's refusal of the tuning file at ``path``, each field at its line there."""
    try:
        _, lines = read_spec_yaml(read_spec_text(path), str(path))
    except SpecError:  # changed since it was read: no lines then
        lines = {}
    located = with_lines(exc.problems, lines, str(path)).problems
    return SpecError(located, str(path), subject=TUNING_JOB)


class TuningReader(Protocol):
    """What the tuning commands read: a server's client or the home's store."""

    def list_tuning_jobs(self, limit: int = 50) -> list[dict[str, Any]]: ...

    def describe_tuning_job(self, name: str) -> dict[str, Any]: ...

    def best_tuning_trial(self, name: str) -> dict[str, Any]: ...

    def stop_tuning_job(self, name: str) -> dict[str, Any]: ...

    def tuning_analysis(self, name: str) -> dict[str, Any]: ...


@contextmanager
def read_tuning(settings: Settings | None = None) -> Iterator[TuningReader]:
    """The configured or running server's client, else the home's store read directly (no
    control plane is started to read: a stop is recorded and acted on when one starts)."""
    settings = settings or Settings.load()
    if settings.server_url or lock_is_held(settings.home):
        with connect(settings) as client:
            yield client
        return
    reader = TuningStoreReader(settings)
    try:
        yield reader
    finally:
        reader.close()


class TuningStoreReader:
    """The tuning routes' answers, computed from the home's store in this process."""

    def __init__(self, settings: Settings) -> None:
        from trainops.store import MetadataStore

        self._store = MetadataStore(settings.db_path) if settings.db_path.exists() else None

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def list_tuning_jobs(self, limit: int = 50) -> list[dict[str, Any]]:
        from trainops.tuner import tuning_summary

        found = [] if self._store is None else self._store.list_tuning_jobs(limit=limit)
        return [tuning_summary(t) for t in found]

    def describe_tuning_job(self, name: str) -> dict[str, Any]:
        from trainops.tuner import describe_tuning_job, stored_config

        store, tuning = self._tuning(name)
        return describe_tuning_job(store, tuning, stored_config(tuning))

    def best_tuning_trial(self, name: str) -> dict[str, Any]:
        best = self.describe_tuning_job(name).get("BestTrainingJob")
        if best is None:
            raise JobNotFoundError(f"tuning job {name!r} has no trial with an objective yet")
        found: dict[str, Any] = best
        return found

    def tuning_analysis(self, name: str) -> dict[str, Any]:
        from trainops.tuner import analyse_tuning_job, stored_config

        store, tuning = self._tuning(name)
        return analyse_tuning_job(store, tuning, stored_config(tuning)).to_json()

    def stop_tuning_job(self, name: str) -> dict[str, Any]:
        from trainops.control import JobEndedError

        store, _ = self._tuning(name)
        if not store.request_tuning_stop(name, time.time()):
            ended = self._tuning(name)[1].status
            raise JobEndedError(f"tuning job {name!r} has already ended ({ended})")
        return self.describe_tuning_job(name)

    def _tuning(self, name: str) -> tuple[Any, Any]:
        tuning = None if self._store is None else self._store.get_tuning_job(name)
        if self._store is None or tuning is None:
            raise JobNotFoundError(f"no tuning job named {name!r}")
        return self._store, tuning


def analytics_rows(description: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns and rows of HyperparameterTuningJobAnalytics.dataframe(): one column per
    tuned hyperparameter (a float where it reads as one), then :data:`ANALYTICS_COLUMNS`."""
    trials = description.get("TrainingJobs", [])
    tuned = sorted({k for t in trials for k in t.get("TunedHyperParameters", {})})
    rows = []
    for trial in trials:
        row: dict[str, Any] = {k: _number(trial["TunedHyperParameters"].get(k)) for k in tuned}
        objective = trial.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
        start, end = trial.get("TrainingStartTime"), trial.get("TrainingEndTime")
        row.update(
            TrainingJobName=trial["TrainingJobName"],
            TrainingJobStatus=trial["TrainingJobStatus"],
            FinalObjectiveValue=objective.get("Value"),
            TrainingStartTime=start,
            TrainingEndTime=end,
            TrainingElapsedTimeSeconds=_elapsed(start, end),
        )
        rows.append(row)
    return [*tuned, *ANALYTICS_COLUMNS], rows


def _number(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def _elapsed(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
