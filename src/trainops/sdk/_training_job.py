"""``TrainingJob``: a job spec that can run itself, like a SageMaker SDK estimator.

It *is* a :class:`~trainops.spec.JobSpec` (same fields, same validation, frozen), plus the
methods that submit and watch it. Runtime state (the job's name once submitted, the settings
it was submitted with) lives in private attributes, outside the spec.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr

from trainops._errors import SpecError, TrainopsError, check_end_status
from trainops._settings import Settings
from trainops.client import Client, follow, format_log_line, format_transition, submit_job
from trainops.sdk._session import session_for
from trainops.spec import (
    ESTIMATOR_ARGUMENTS,
    JobSpec,
    check_channel_sources,
    resolve_paths,
    sagemaker_hint,
)

__all__ = ["TrainingJob", "attach_job"]


class TrainingJob(JobSpec):
    """A training job declared in Python; ``fit()`` runs it.

    Relative paths (``source_dir``, the entry point, local channel and output paths) are resolved
    against the current directory when ``fit()`` is called.

    Jobs go to ``TRAINOPS_SERVER`` when it is set, else to the home's running ``trainops server``
    (found through its lock and ``server.json``), else to an embedded server that lives as long
    as this Python process: ``fit(wait=True)`` keeps it until the job ends, and a job started
    with ``fit(wait=False)`` is stopped (and waited for) when the process exits, so it cannot
    keep running afterwards. Start ``trainops server`` to submit jobs that outlive the process.
    """

    _submitted_name: str | None = PrivateAttr(default=None)
    _run_settings: Settings | None = PrivateAttr(default=None)

    @property
    def name(self) -> str | None:
        """The name of the job submitted by the last ``fit()``; ``None`` before."""
        return self._submitted_name

    @property
    def latest_training_job(self) -> TrainingJob | None:
        """The SDK estimator's ``latest_training_job``: the job of the last ``fit()`` (this
        object: its ``name``, ``describe()``, ``wait()``, ``stop()``, ``logs()``), or ``None``
        before any ``fit()``."""
        return None if self._submitted_name is None else self

    @property
    def model_data(self) -> str | None:
        """The SDK estimator's ``model_data``: the URI of the job's ``model.tar.gz`` once it has
        been uploaded (``ModelArtifacts.S3ModelArtifacts`` of its description; with
        ``disable_output_compression``, the prefix ``.../output/model/`` of its files), else
        ``None`` (before ``fit()``, while the job runs, or if it saved no model)."""
        if self._submitted_name is None:
            return None
        artifacts = self.describe().get("ModelArtifacts") or {}
        uri = artifacts.get("S3ModelArtifacts")
        return str(uri) if uri else None

    def fit(
        self,
        inputs: str | Mapping[str, Any] | None = None,
        wait: bool = True,
        logs: bool | str = True,
        job_name: str | None = None,
        experiment_config: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Submit the job; with ``wait``, follow it to its end (printing its log if ``logs``).

        The arguments are the SageMaker SDK's ``Estimator.fit``: ``inputs`` (a URI for the one
        channel ``training``, or channel names mapped to URIs or :class:`Channel` objects) replaces the
        job's inputs for this run, ``job_name`` its name; ``logs`` may also be the SDK's ``"All"``
        or ``"None"``. Returns the job's description: the final one when waiting (a Failed job
        raises :class:`~trainops.UnexpectedStatusError`, as the SDK does), the first one
        otherwise.
        """
        spec = self._for_run(inputs, job_name, experiment_config)
        # The code and the local channels before a control plane is started for the job.
        check_channel_sources(resolve_paths(spec, Path.cwd()))
        show = logs if isinstance(logs, bool) else logs != "None"
        for note in self.sagemaker_notes:
            print(f"note: {note}", file=sys.stderr, flush=True)
        settings = Settings.load()
        session = session_for(settings)
        self._run_settings = settings
        self._submitted_name = submit_job(
            session.client, spec, settings, base_dir=Path.cwd(), progress=show
        )
        session.jobs.append(self._submitted_name)
        if not wait:
            return session.client.describe(self._submitted_name)
        return self.wait(logs=show)

    def _for_run(
        self,
        inputs: str | Mapping[str, Any] | None,
        job_name: str | None,
        experiment_config: Mapping[str, Any] | None,
    ) -> JobSpec:
        if experiment_config is not None:
            reason = sagemaker_hint(ESTIMATOR_ARGUMENTS, "experiment_config") or ""
            raise SpecError([("experiment_config", reason)])
        fields = dict(self)
        if inputs is not None:
            fields["inputs"] = inputs
            if self._input_mode is not None:  # the estimator's input_mode: fit's channels too
                fields["input_mode"] = self._input_mode
        if job_name is not None:
            fields["job_name"] = job_name
        return JobSpec(**fields)

    def wait(self, logs: bool = True) -> dict[str, Any]:
        """Follow the submitted job until it ends; returns its final description (Completed or
        Stopped). A Failed job raises :class:`~trainops.UnexpectedStatusError`, as the SageMaker
        SDK's ``wait()`` raises its ``UnexpectedStatusException``; the error carries the final
        description."""
        if logs:
            final = follow(self._client(), self._require_name(), _print_line, _print_transition)
        else:
            final = follow(self._client(), self._require_name(), _skip)
        check_end_status(final, "TrainingJobStatus", "TrainingJobName")
        return final

    def describe(self) -> dict[str, Any]:
        """The DescribeTrainingJob-shaped description of the submitted job."""
        return self._client().describe(self._require_name())

    def logs(self, after: int = 0, host: str | None = None, limit: int = 1000) -> dict[str, Any]:
        """One page of log lines after cursor ``after`` (``{"lines", "next", ...}``)."""
        return self._client().logs(self._require_name(), after=after, host=host, limit=limit)

    def metrics(self, metric_name: str | None = None) -> list[dict[str, Any]]:
        """The job's metric points in time order."""
        return self._client().metrics(self._require_name(), metric_name)

    def stop(self) -> dict[str, Any]:
        """Ask the job to stop; returns its description (``Stopping``)."""
        return self._client().stop(self._require_name())

    def _require_name(self) -> str:
        if self._submitted_name is None:
            raise TrainopsError("this TrainingJob has not been submitted yet; call fit() first")
        return self._submitted_name

    def _client(self) -> Client:
        self._require_name()
        return session_for(self._run_settings or Settings.load()).client


def attach_job(job: TrainingJob, name: str, settings: Settings) -> TrainingJob:
    """``job`` as if its ``fit()`` had submitted job ``name`` (a tuning job's trial, say):
    ``describe()``, ``logs()``, ``metrics()`` and ``wait()`` read that job."""
    job._submitted_name, job._run_settings = name, settings
    return job


def _print_line(line: dict[str, Any]) -> None:
    print(format_log_line(line), flush=True)


def _print_transition(transition: dict[str, Any]) -> None:
    print(format_transition(transition), flush=True)


def _skip(_item: dict[str, Any]) -> None:
    """Nothing is shown when following without logs."""
