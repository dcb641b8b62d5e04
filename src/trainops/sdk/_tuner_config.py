"""The SageMaker SDK's tuning arguments made into a :class:`~trainops.tuning.TuningJobConfig`.

``HyperparameterTuner`` takes the SDK's arguments (``objective_metric_name``, ``max_jobs``,
``early_stopping_type`` ...); the tuning job itself is the same config a tuning YAML declares,
checked by the same rules. A refusal names the SDK argument (``max_jobs``, ``estimator.inputs``)
rather than the YAML field. The SDK's helper classes are here too: ``WarmStartConfig`` and
``WarmStartTypes`` (sagemaker.tuner) and ``TuningJobCompletionCriteriaConfig``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trainops._errors import TUNING_JOB, SpecError
from trainops.spec import JobSpec, MetricDefinition
from trainops.tuning import (
    BestObjectiveNotImproving,
    CompletionCriteria,
    ConvergenceDetected,
    Enabled,
    TuningJobConfig,
    WarmStartType,
)
from trainops.tuning import WarmStartConfig as _WarmStart

__all__ = [
    "TuningJobCompletionCriteriaConfig",
    "WarmStartConfig",
    "WarmStartTypes",
    "build_config",
    "check_arguments",
    "metric_definitions",
]

_BASE_NAME = re.compile(r"^[A-Za-z0-9](-*[A-Za-z0-9])*$")
_NO_TAGS = "has no meaning in trainops (no AWS account is involved); remove it"

#: The SDK's ``WarmStartTypes`` (same members, same values).
WarmStartTypes = WarmStartType

# The config's fields as the tuner's arguments name them (longest prefix first).
_SDK_NAMES = (
    ("resource_limits.max_number_of_training_jobs", "max_jobs"),
    ("resource_limits.max_parallel_training_jobs", "max_parallel_jobs"),
    ("resource_limits.max_runtime_in_seconds", "max_runtime_in_seconds"),
    ("objective.metric_name", "objective_metric_name"),
    ("objective.type", "objective_type"),
    ("objective", "objective_metric_name"),
    ("training_job_early_stopping_type", "early_stopping_type"),
    ("completion_criteria", "completion_criteria_config"),
    ("tuning_job_name", "job_name"),
    ("training_job", "estimator"),
)


class WarmStartConfig(_WarmStart):
    """The SDK's ``WarmStartConfig(warm_start_type, parents)``: ``parents`` is any collection
    of tuning job names (1 to 5; the SDK takes a set), kept in sorted order."""

    def __init__(self, warm_start_type: WarmStartType | str, parents: Iterable[str]) -> None:
        fields: dict[str, Any] = {
            "warm_start_type": warm_start_type,
            "parents": sorted(set(parents)),
        }
        super().__init__(**fields)

    @property
    def type(self) -> WarmStartType:
        """The warm start's type, as the SDK's attribute names it."""
        return self.warm_start_type


def TuningJobCompletionCriteriaConfig(
    max_number_of_training_jobs_not_improving: int | None = None,
    complete_on_convergence: bool | None = None,
    target_objective_metric_value: float | None = None,
) -> CompletionCriteria:
    """The SDK's ``TuningJobCompletionCriteriaConfig``, as a tuning job's completion criteria."""
    fields: dict[str, Any] = {"target_objective_metric_value": target_objective_metric_value}
    if max_number_of_training_jobs_not_improving is not None:
        fields["best_objective_not_improving"] = BestObjectiveNotImproving(
            max_number_of_training_jobs_not_improving=max_number_of_training_jobs_not_improving
        )
    if complete_on_convergence is not None:
        switch = Enabled.ENABLED if complete_on_convergence else Enabled.DISABLED
        fields["convergence_detected"] = ConvergenceDetected(complete_on_convergence=switch)
    return CompletionCriteria(**fields)


def metric_definitions(given: Sequence[Any]) -> list[MetricDefinition]:
    """The tuner's ``metric_definitions``: the SDK's ``{"Name": ..., "Regex": ...}`` dicts (any
    key case) or :class:`MetricDefinition` objects."""
    if isinstance(given, str | bytes | Mapping):
        raise SpecError(
            [("metric_definitions", "a list, e.g. [{'Name': 'loss', 'Regex': ...}]")],
            subject=TUNING_JOB,
        )
    found = []
    for index, item in enumerate(given):
        if isinstance(item, MetricDefinition):
            found.append(item)
            continue
        if not isinstance(item, Mapping):
            reason = f"{type(item).__name__}: each is a dict with 'Name' and 'Regex'"
            raise SpecError([(f"metric_definitions.{index}", reason)], subject=TUNING_JOB)
        fields = {str(k).lower(): v for k, v in item.items()}
        try:
            found.append(MetricDefinition(**fields))
        except SpecError as exc:
            raise _renamed(exc, f"metric_definitions.{index}") from None
    return found


def check_arguments(estimator: object, tags: object, base_tuning_job_name: str | None) -> None:
    """What the tuning job's config does not check: the estimator is a job spec, no tags (they
    mean nothing here, as an estimator's do not), a base name that makes valid names."""
    if estimator is not None and not isinstance(estimator, JobSpec):
        kind = type(estimator).__name__
        raise SpecError(
            [("estimator", f"a TrainingJob (or JobSpec), not a {kind}")], subject=TUNING_JOB
        )
    if tags:
        raise SpecError([("tags", f"a tuning job's tags {_NO_TAGS}")], subject=TUNING_JOB)
    base = base_tuning_job_name
    if base is not None and not _BASE_NAME.match(base):
        raise SpecError([(
            "base_tuning_job_name",
            f"{base!r}: letters, digits or hyphens, starting and ending with a letter or digit",
        )], subject=TUNING_JOB)  # fmt: skip


def build_config(
    estimator: JobSpec, fields: Mapping[str, Any], *, tuner_metrics: bool
) -> TuningJobConfig:
    """The tuning job of ``estimator`` and the config ``fields``; a refusal names the tuner's
    arguments (``metric_definitions`` for the job's metrics when the tuner gave them)."""
    try:
        return TuningJobConfig(training_job=estimator, **fields)
    except SpecError as exc:
        problems = [(_sdk_name(path, tuner_metrics), reason) for path, reason in exc.problems]
        raise SpecError(problems, exc.source, subject=exc.subject) from None


def _sdk_name(path: str, tuner_metrics: bool) -> str:
    if tuner_metrics and _under(path, "training_job.metric_definitions"):
        return "metric_definitions" + path.removeprefix("training_job.metric_definitions")
    for field, argument in _SDK_NAMES:
        if _under(path, field):
            return argument + path.removeprefix(field)
    return path


def _under(path: str, field: str) -> bool:
    return path == field or path.startswith(field + ".")


def _renamed(exc: SpecError, prefix: str) -> SpecError:
    problems = [(f"{prefix}.{path}" if path else prefix, r) for path, r in exc.problems]
    return SpecError(problems, subject=TUNING_JOB)
