"""``HyperparameterTuner``: a tuning job declared and run from Python, as with the SageMaker SDK.

The tuner takes a :class:`~trainops.sdk.TrainingJob` (the SDK's estimator) and the SDK's tuning
arguments, checks them as a tuning YAML is checked (at construction, so a bad definition fails
before anything runs), and ``fit()`` uploads the job's code once and creates the tuning job on
the server :class:`TrainingJob` uses (with none running, one embedded in this process: a tuning
job left running by ``fit(wait=False)`` is then stopped when the process exits).

Reading a tuning job (``describe``, ``best_training_job``, ``analytics``, ``attach``) goes to the
running server, or with none to the home's store: no control plane is started to read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops._errors import TUNING_JOB, SpecError, TrainopsError, check_end_status
from trainops._settings import Settings
from trainops.client import new_tuning_job_name, read_tuning, submit_tuning_config
from trainops.sdk._analytics import HyperparameterTuningJobAnalytics
from trainops.sdk._session import session_for, wait_for_tuning
from trainops.sdk._training_job import TrainingJob, attach_job
from trainops.sdk._tuner_config import (
    WarmStartConfig,
    WarmStartTypes,
    build_config,
    check_arguments,
    metric_definitions,
)
from trainops.sdk._tuner_described import tuner_arguments, typed_values
from trainops.spec import JobSpec, check_channel_sources, resolve_paths
from trainops.tuning import (
    CompletionCriteria,
    ParameterRange,
    StrategyConfig,
    TuningJobConfig,
)
from trainops.tuning import WarmStartConfig as _WarmStart

__all__ = ["HyperparameterTuner", "LatestTuningJob"]

_STAMP = len(new_tuning_job_name()) - len("tune-")  # YYMMDD-HHMMSS-mmm
_MAX_NAME = 32


@dataclass(frozen=True)
class LatestTuningJob:
    """The tuning job the last ``fit()`` started (the SDK's ``tuner.latest_tuning_job``)."""

    name: str


class HyperparameterTuner:
    """Runs tuning jobs of ``estimator``, as the SageMaker SDK's ``HyperparameterTuner``.

    The arguments are the SDK's. ``max_jobs`` defaults to 1 (as in the SDK; every combination
    with ``strategy="Grid"``); ``metric_definitions`` (the SDK's ``{"Name", "Regex"}`` dicts or
    :class:`~trainops.MetricDefinition` objects), when given, replace the estimator's. ``tags``
    mean nothing here and are refused, as an estimator's are.
    """

    def __init__(
        self,
        estimator: JobSpec | None,
        objective_metric_name: str,
        hyperparameter_ranges: Mapping[str, ParameterRange],
        metric_definitions: Sequence[Any] | None = None,
        strategy: str = "Bayesian",
        objective_type: str = "Maximize",
        max_jobs: int | None = None,
        max_parallel_jobs: int = 1,
        max_runtime_in_seconds: int | None = None,
        tags: Sequence[Mapping[str, str]] | None = None,
        base_tuning_job_name: str | None = None,
        warm_start_config: _WarmStart | None = None,
        strategy_config: StrategyConfig | None = None,
        completion_criteria_config: CompletionCriteria | None = None,
        early_stopping_type: str = "Off",
        random_seed: int | None = None,
    ) -> None:
        check_arguments(estimator, tags, base_tuning_job_name)
        self.estimator = estimator
        self.objective_metric_name = objective_metric_name
        self._hyperparameter_ranges = dict(hyperparameter_ranges)
        self.metric_definitions = metric_definitions
        self.strategy = strategy
        self.objective_type = objective_type
        self.max_jobs = max_jobs
        self.max_parallel_jobs = max_parallel_jobs
        self.max_runtime_in_seconds = max_runtime_in_seconds
        self.base_tuning_job_name = base_tuning_job_name
        self.warm_start_config = warm_start_config
        self.strategy_config = strategy_config
        self.completion_criteria_config = completion_criteria_config
        self.early_stopping_type = early_stopping_type
        self.random_seed = random_seed
        self.latest_tuning_job: LatestTuningJob | None = None
        self._settings: Settings | None = None
        if estimator is not None:
            self._config(estimator, None)  # refused here, before anything runs

    # --- declaring ---------------------------------------------------------------------------

    def hyperparameter_ranges(self) -> dict[str, ParameterRange]:
        """The tuned hyperparameters' ranges, by name."""
        return dict(self._hyperparameter_ranges)

    def _config(self, estimator: JobSpec, name: str | None) -> TuningJobConfig:
        job = JobSpec(**dict(estimator))
        if self.metric_definitions is not None:
            defined = metric_definitions(self.metric_definitions)
            job = job.model_copy(update={"metric_definitions": defined})
        fields: dict[str, Any] = {
            "tuning_job_name": name,
            "strategy": self.strategy,
            "strategy_config": self.strategy_config,
            "objective": {"metric_name": self.objective_metric_name, "type": self.objective_type},
            "hyperparameter_ranges": self._hyperparameter_ranges,
            "resource_limits": self._limits(),
            "random_seed": self.random_seed,
            "training_job_early_stopping_type": self.early_stopping_type,
            "completion_criteria": self.completion_criteria_config,
            "warm_start_config": self.warm_start_config,
        }
        return build_config(job, fields, tuner_metrics=self.metric_definitions is not None)

    def _limits(self) -> dict[str, Any]:
        grid = isinstance(self.strategy, str) and self.strategy.lower() == "grid"
        jobs = 1 if self.max_jobs is None and not grid else self.max_jobs
        return {
            "max_number_of_training_jobs": jobs,
            "max_parallel_training_jobs": self.max_parallel_jobs,
            "max_runtime_in_seconds": self.max_runtime_in_seconds,
        }

    # --- running -----------------------------------------------------------------------------

    def fit(
        self,
        inputs: str | Mapping[str, Any] | None = None,
        job_name: str | None = None,
        wait: bool = True,
        logs: bool = True,
    ) -> dict[str, Any]:
        """Start a tuning job; with ``wait``, follow it to its end (printing its progress if
        ``logs``). ``inputs`` replaces the estimator's channels for this job (as
        ``TrainingJob.fit`` takes them); ``job_name`` names it (else ``base_tuning_job_name`` or
        ``tune``, and the time). Returns the tuning job's description: the final one when
        waiting (a Failed one raises :class:`~trainops.UnexpectedStatusError`), the first one
        otherwise."""
        estimator = self._require_estimator("fit()")
        if inputs is not None:
            estimator = JobSpec(**{**dict(estimator), "inputs": inputs})
        config = self._config(_resolved(estimator), job_name or self._new_name())
        settings = Settings.load()
        session = session_for(settings)
        name = submit_tuning_config(
            session.client, config, settings, base_dir=Path.cwd(), progress=logs
        )
        session.tuning_jobs.append(name)
        self.latest_tuning_job, self._settings = LatestTuningJob(name), settings
        if wait:
            return self.wait(logs=logs)
        return self.describe()

    def _new_name(self) -> str:
        stamp = new_tuning_job_name()[-_STAMP:]
        base = (self.base_tuning_job_name or "tune")[: _MAX_NAME - _STAMP - 1].rstrip("-")
        return f"{base}-{stamp}"

    def wait(self, logs: bool = True) -> dict[str, Any]:
        """Wait until the tuning job ends (printing a line whenever its counts or its best trial
        move, if ``logs``); returns its final description (Completed or Stopped). A Failed
        tuning job raises :class:`~trainops.UnexpectedStatusError`, as the SDK's does."""
        name = self._require_name()
        client = session_for(self._settings or Settings.load()).client
        final = wait_for_tuning(client, name, _print_progress if logs else _quiet)
        check_end_status(final, "HyperParameterTuningJobStatus", "HyperParameterTuningJobName")
        return final

    def stop_tuning_job(self) -> dict[str, Any]:
        """Stop the tuning job and its running trials; returns its description (Stopping)."""
        with read_tuning(self._settings) as reader:
            return reader.stop_tuning_job(self._require_name())

    # --- reading -----------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The tuning job as DescribeHyperParameterTuningJob gives it, with its trials."""
        with read_tuning(self._settings) as reader:
            return reader.describe_tuning_job(self._require_name())

    def best_training_job(self) -> str:
        """The name of the trial with the best objective so far (an error while none has one)."""
        with read_tuning(self._settings) as reader:
            name: str = reader.best_tuning_trial(self._require_name())["TrainingJobName"]
        return name

    def best_estimator(self, best_training_job: str | None = None) -> TrainingJob:
        """A :class:`TrainingJob` attached to the best trial (``describe()``, ``logs()``,
        ``metrics()`` read that trial), declared as the estimator with the trial's
        hyperparameters: its ``fit()`` trains the best configuration again."""
        estimator = self._require_estimator("best_estimator()")
        name = best_training_job or self.best_training_job()
        trial = next((t for t in self.describe()["TrainingJobs"] if t["TrainingJobName"] == name),
                     None)  # fmt: skip
        if trial is None:
            raise TrainopsError(f"{name!r} is not a trial of tuning job {self._require_name()!r}")
        tuned = typed_values(self._hyperparameter_ranges, trial["TunedHyperParameters"])
        fields = {**dict(estimator), "hyperparameters": {**estimator.hyperparameters, **tuned}}
        return attach_job(TrainingJob(**fields), name, self._settings or Settings.load())

    def analytics(self) -> HyperparameterTuningJobAnalytics:
        """The trials as a DataFrame and more (:class:`HyperparameterTuningJobAnalytics`)."""
        return HyperparameterTuningJobAnalytics(self._require_name(), self._settings)

    @classmethod
    def attach(cls, tuning_job_name: str, settings: Settings | None = None) -> HyperparameterTuner:
        """A tuner for an existing tuning job, rebuilt from its description. Its estimator is
        not known (the description leaves the training job out): ``fit()`` and
        ``best_estimator()`` need one, so pass ``estimator=`` to ``transfer_learning_tuner``."""
        with read_tuning(settings) as reader:
            described = reader.describe_tuning_job(tuning_job_name)
        tuner = cls(None, **tuner_arguments(described))
        tuner.latest_tuning_job, tuner._settings = LatestTuningJob(tuning_job_name), settings
        return tuner

    # --- warm start --------------------------------------------------------------------------

    def transfer_learning_tuner(
        self, additional_parents: Collection[str] | None = None, estimator: JobSpec | None = None
    ) -> HyperparameterTuner:
        """A new tuner warm started (``TransferLearning``) from this tuning job and
        ``additional_parents``, for ``estimator`` (default: this tuner's)."""
        return self._warm_start_tuner(
            WarmStartTypes.TRANSFER_LEARNING, additional_parents, estimator or self.estimator
        )

    def identical_dataset_and_algorithm_tuner(
        self, additional_parents: Collection[str] | None = None
    ) -> HyperparameterTuner:
        """A new tuner warm started (``IdenticalDataAndAlgorithm``) from this tuning job and
        ``additional_parents``, for this tuner's estimator."""
        return self._warm_start_tuner(
            WarmStartTypes.IDENTICAL_DATA_AND_ALGORITHM, additional_parents, self.estimator
        )

    def _warm_start_tuner(
        self,
        kind: WarmStartTypes,
        additional_parents: Collection[str] | None,
        estimator: JobSpec | None,
    ) -> HyperparameterTuner:
        if estimator is None:
            raise TrainopsError(
                "this tuner was attached by name and has no estimator: pass estimator= to "
                "transfer_learning_tuner()"
            )
        parents = {self._require_name(), *(additional_parents or ())}
        return HyperparameterTuner(
            estimator,
            self.objective_metric_name,
            self._hyperparameter_ranges,
            metric_definitions=self.metric_definitions,
            strategy=self.strategy,
            objective_type=self.objective_type,
            max_jobs=self.max_jobs,
            max_parallel_jobs=self.max_parallel_jobs,
            max_runtime_in_seconds=self.max_runtime_in_seconds,
            base_tuning_job_name=self.base_tuning_job_name,
            warm_start_config=WarmStartConfig(kind, parents),
            strategy_config=self.strategy_config,
            completion_criteria_config=self.completion_criteria_config,
            early_stopping_type=self.early_stopping_type,
            random_seed=self.random_seed,
        )

    # --- state -------------------------------------------------------------------------------

    def _require_name(self) -> str:
        if self.latest_tuning_job is None:
            raise TrainopsError("this tuner has started no tuning job yet; call fit() first")
        return self.latest_tuning_job.name

    def _require_estimator(self, what: str) -> JobSpec:
        if self.estimator is None:
            raise TrainopsError(
                f"{what} needs the tuner's estimator; this tuner was attached by name: make one "
                "with HyperparameterTuner(estimator, ...)"
            )
        return self.estimator


def _resolved(estimator: JobSpec) -> JobSpec:
    """``estimator`` with its paths made absolute against the current directory and its local
    channels checked: refused here, before a control plane is started for the tuning job."""
    try:
        spec = resolve_paths(estimator, Path.cwd())
        check_channel_sources(spec)
    except SpecError as exc:
        problems = [(f"estimator.{p}", r) for p, r in exc.problems]
        raise SpecError(problems, subject=TUNING_JOB) from None
    return spec


def _print_progress(line: str) -> None:
    print(line, flush=True)


def _quiet(_line: str) -> None:
    """Nothing is shown when waiting without logs."""
