"""The ``sagemaker`` service's tuning operations: CreateHyperParameterTuningJob,
DescribeHyperParameterTuningJob, ListHyperParameterTuningJobs,
ListTrainingJobsForHyperParameterTuningJob and StopHyperParameterTuningJob, on trainops' tuning
jobs (``trainops.tuner``).

Nothing here is a second copy of a tuning job: a request becomes the tuning job's declaration
(``_tuning_request``) and is created by the REST route's own code (``TuningRoutes``: the same
checks, the same record); the describe is the tuner's (``tuner.describe_tuning_job``, already in
DescribeHyperParameterTuningJob's shape), to which this adds only what the API spells otherwise
(the ARNs, the training job definition); the model's output shape drops our extra keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainops._errors import SpecError
from trainops._settings import Settings
from trainops.control import JobController
from trainops.server._schema import KEPT_TUNING, kept_of, with_kept
from trainops.server._views import job_masker, spec_sections
from trainops.server.aws._errors import AwsError
from trainops.server.aws._paging import page_of, within_windows
from trainops.server.aws._sagemaker import (
    _one_line,
    api_description,
    bad_token,
    masked_kept,
    training_job_arn,
    tuning_job_arn,
)
from trainops.server.aws._services import AwsOperation
from trainops.server.aws._tags import MAX_TAGS, check_tags, too_many_tags
from trainops.server.aws._tuning_request import OBJECTIVE_HYPERPARAMETER as _OBJECTIVE
from trainops.server.aws._tuning_request import api_field, tuning_request
from trainops.store import (
    JobExistsError,
    MetadataStore,
    TagLimitError,
    TuningJobRecord,
    TuningTrialRecord,
)

if TYPE_CHECKING:
    from trainops.tuning import TuningJobConfig

__all__ = ["tuning_job_arn", "tuning_operations"]

_MAX_SCANNED = 100_000  # tuning jobs a ListHyperParameterTuningJobs call filters and sorts at most
_JOB_SORT = {"Name": "name", "CreationTime": "creation_time", "Status": "status"}
#: The training job definition's sections, as DescribeTrainingJob names them.
# Where the kept request records the name of its one definition, when it was sent in a list.
_DEFINITION_NAME = "TrainingJobDefinitionName"
_DEFINITION = (
    "AlgorithmSpecification",
    "InputDataConfig",
    "OutputDataConfig",
    "ResourceConfig",
    "StoppingCondition",
    "CheckpointConfig",
    "RetryStrategy",
    "Environment",
)


def tuning_operations(controller: JobController, settings: Settings) -> list[AwsOperation]:
    """The tuning operations answered for ``controller``'s tuning jobs."""
    ops = _TuningOperations(controller, settings)
    table: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = [
        ("CreateHyperParameterTuningJob", ops.create),
        ("DescribeHyperParameterTuningJob", ops.describe),
        ("ListHyperParameterTuningJobs", ops.list_tuning_jobs),
        ("ListTrainingJobsForHyperParameterTuningJob", ops.list_training_jobs),
        ("StopHyperParameterTuningJob", ops.stop),
    ]
    return [AwsOperation(name, handler) for name, handler in table]


def _not_found(name: str) -> AwsError:
    # The service's words, as users report them (aws/amazon-sagemaker-examples#1540).
    return AwsError(
        400,
        "ResourceNotFound",
        f"Amazon SageMaker can't find a tuning job called {name}. Type another name.",
    )


class _TuningOperations:
    def __init__(self, controller: JobController, settings: Settings) -> None:
        self.controller, self.settings = controller, settings

    @property
    def store(self) -> MetadataStore:
        return self.controller.store

    def _tuning(self, name: str) -> TuningJobRecord:
        """The tuning job of this name, in any case (the exact one first)."""
        tuning = self.store.get_tuning_job(name) or self._named(name)
        if tuning is None:
            raise _not_found(name)
        return tuning

    def _named(self, name: str) -> TuningJobRecord | None:
        """The tuning job whose name is this one in another case, if any (the service's names
        are not case sensitive, and the ARN spells them in lower case)."""
        found = self.store.list_tuning_jobs(limit=_MAX_SCANNED)
        return next((t for t in found if t.name.lower() == name.lower()), None)

    def _config(self, tuning: TuningJobRecord) -> TuningJobConfig:
        from trainops import tuner

        try:
            return tuner.stored_config(tuning)
        except SpecError as exc:  # written by another trainops: the tuner fails it too
            raise AwsError(500, "InternalFailure", _one_line(exc)) from None

    # --- CreateHyperParameterTuningJob --------------------------------------------------------

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        from trainops.server.routes import TuningRequest, TuningRoutes

        name = body["HyperParameterTuningJobName"]
        config, code_uri = tuning_request(body, self.settings.server.images)
        tags = check_tags(body.get("Tags") or [])
        if self._named(name) is not None:
            raise self._in_use(name)
        kept = _kept(body)

        def with_tuning(tuning: TuningJobRecord) -> None:  # in the tuning job's transaction
            self.store.put_api_request("hyper-parameter-tuning-job", tuning.name, kept)
            self.store.put_tags("hyper-parameter-tuning-job", tuning.name, tags, MAX_TAGS)

        try:
            request = TuningRequest(config=config, code_uri=code_uri)
            TuningRoutes(self.controller).create(request, with_tuning)
        except TagLimitError as exc:
            raise too_many_tags(exc.count) from None
        except JobExistsError:
            raise self._in_use(name) from None
        except SpecError as exc:
            raise AwsError(400, "ValidationException", _refusal(exc)) from None
        except ValueError as exc:  # pydantic's, of a member our declaration cannot take
            raise AwsError(400, "ValidationException", _one_line(exc)) from None
        return {"HyperParameterTuningJobArn": tuning_job_arn(self.settings.region, name)}

    def _in_use(self, name: str) -> AwsError:
        # The service's words, as users report them (aws/amazon-sagemaker-examples#3353).
        return AwsError(
            400,
            "ResourceInUse",
            f"A hyperparameter tuning job with the name, {name}, already exists. Choose a "
            "different name.",
        )

    # --- DescribeHyperParameterTuningJob ------------------------------------------------------

    def describe(self, body: dict[str, Any]) -> dict[str, Any]:
        from trainops import tuner

        tuning = self._tuning(body["HyperParameterTuningJobName"])
        config = self._config(tuning)
        described = tuner.describe_tuning_job(self.store, tuning, config)
        kept = self.store.api_request("hyper-parameter-tuning-job", tuning.name)
        named = kept.get(_DEFINITION_NAME)
        for key in ("BestTrainingJob", "OverallBestTrainingJob"):
            if key in described:
                described[key] = self._with_arn(described[key], named)
        definition = self._definition(tuning, config, kept)
        if named is not None:
            # sent as TrainingJobDefinitions: given back so, as the service does, the objective
            # and the ranges in the definition, not the config (the SDK's attach of a tuner made
            # by ``create`` fails where the config has them)
            searched = dict(described["HyperParameterTuningJobConfig"])
            own = {
                "DefinitionName": named,
                "TuningObjective": searched.pop("HyperParameterTuningJobObjective"),
                "HyperParameterRanges": searched.pop("ParameterRanges"),
            }
            described["HyperParameterTuningJobConfig"] = searched
            definitions: dict[str, Any] = {"TrainingJobDefinitions": [definition | own]}
        else:
            definitions = {"TrainingJobDefinition": definition}
        arn = tuning_job_arn(self.settings.region, tuning.name)
        return described | {"HyperParameterTuningJobArn": arn} | definitions

    def _with_arn(self, summary: dict[str, Any], definition: str | None) -> dict[str, Any]:
        """A trial's summary with its ARN, and the name of its definition where the request
        named one (the SDK's ``best_estimator`` of a tuner made by ``create`` reads it)."""
        arn = training_job_arn(self.settings.region, summary["TrainingJobName"])
        named = {} if definition is None else {"TrainingJobDefinitionName": definition}
        return summary | {"TrainingJobArn": arn} | named

    def _definition(
        self, tuning: TuningJobRecord, config: TuningJobConfig, kept: dict[str, Any]
    ) -> dict[str, Any]:
        """The trials' training job as ``HyperParameterTrainingJobDefinition`` (its secrets
        masked as DescribeTrainingJob masks them)."""
        job = config.training_job
        sections = spec_sections(job.view(), self.settings)
        api = api_description(sections | {"TrainingJobName": tuning.name}, self.settings.region)
        definition = {key: api[key] for key in _DEFINITION if key in api}
        static = {k: v for k, v in sections["HyperParameters"].items() if k in job.hyperparameters}
        definition |= {
            # the service adds the objective's name (the SDK's HyperparameterTuner.attach
            # removes it, and fails where it is not)
            "StaticHyperParameters": static | {_OBJECTIVE: config.objective.metric_name},
            "EnableManagedSpotTraining": job.use_spot_instances,
        }
        sent = kept.get("TrainingJobDefinition") or {}
        mask = job_masker(job.view())
        return with_kept(definition, masked_kept(sent, mask, "StaticHyperParameters"))

    # --- ListHyperParameterTuningJobs ---------------------------------------------------------

    def list_tuning_jobs(self, body: dict[str, Any]) -> dict[str, Any]:
        status = body.get("StatusEquals")
        found = self.store.list_tuning_jobs(statuses=[status] if status else [], limit=_MAX_SCANNED)
        found = [t for t in found if _matches(t, body)]
        key = _JOB_SORT[body.get("SortBy", "Name")]
        descending = body.get("SortOrder", "Ascending") == "Descending"
        found.sort(key=lambda t: (getattr(t, key), t.name), reverse=descending)
        page, token = _page(found, body)
        answer: dict[str, Any] = {
            "HyperParameterTuningJobSummaries": [self._tuning_summary(t) for t in page]
        }
        return answer | token

    def _tuning_summary(self, tuning: TuningJobRecord) -> dict[str, Any]:
        from trainops import tuner

        config = self._config(tuning)
        limits = config.resource_limits
        resource_limits: dict[str, Any] = {
            "MaxNumberOfTrainingJobs": config.max_training_jobs,
            "MaxParallelTrainingJobs": limits.max_parallel_training_jobs,
            "MaxRuntimeInSeconds": limits.max_runtime_in_seconds,
        }
        return {
            **tuner.tuning_summary(tuning),
            "HyperParameterTuningJobArn": tuning_job_arn(self.settings.region, tuning.name),
            "Strategy": config.strategy.value,
            "LastModifiedTime": tuning.last_modified_time,
            **tuner.status_counters(self.store.trials(tuning.name)),
            "ResourceLimits": resource_limits,
        }

    # --- ListTrainingJobsForHyperParameterTuningJob -------------------------------------------

    def list_training_jobs(self, body: dict[str, Any]) -> dict[str, Any]:
        from trainops import tuner

        tuning = self._tuning(body["HyperParameterTuningJobName"])
        config = self._config(tuning)
        trials = self.store.trials(tuning.name)
        if body.get("StatusEquals"):
            trials = [t for t in trials if tuner.training_status(t) == body["StatusEquals"]]
        by = body.get("SortBy", "Name")
        if by == "FinalObjectiveMetricValue":  # the service leaves out trials without one
            trials = [t for t in trials if t.objective is not None]
        trials.sort(key=_trial_key(by), reverse=body.get("SortOrder", "Ascending") == "Descending")
        page, token = _page(trials, body)
        now = time.time()
        kept = self.store.api_request("hyper-parameter-tuning-job", tuning.name)
        named = kept.get(_DEFINITION_NAME)
        summaries = [
            self._with_arn(tuner.trial_summary(self.store, config, t, now), named) for t in page
        ]
        return {"TrainingJobSummaries": summaries} | token

    # --- StopHyperParameterTuningJob ----------------------------------------------------------

    def stop(self, body: dict[str, Any]) -> dict[str, Any]:
        name = self._tuning(body["HyperParameterTuningJobName"]).name
        if not self.store.request_tuning_stop(name, time.time()):
            status = self._tuning(name).status
            raise AwsError(
                400,
                "ValidationException",
                f"The request was rejected because the tuning job is in status {status}.",
            )
        return {}


def _refusal(exc: SpecError) -> str:
    """A refused declaration in one line, each problem said at the request's member."""
    problems = [f"{api_field(field)}: {why}" if field else why for field, why in exc.problems]
    return _one_line(Exception("; ".join(problems) or str(exc)))


def _matches(tuning: TuningJobRecord, body: dict[str, Any]) -> bool:
    """Whether the tuning job's name and times are inside the request's filters (the times
    strictly, at the API's millisecond precision: a time read from an answer and sent back as a
    bound names that same moment)."""
    contains = body.get("NameContains")
    if contains is not None and contains.lower() not in tuning.name.lower():
        return False
    return within_windows(tuning.creation_time, tuning.last_modified_time, body)


def _trial_key(by: str) -> Callable[[TuningTrialRecord], tuple[Any, ...]]:
    from trainops import tuner

    keys: dict[str, Callable[[TuningTrialRecord], Any]] = {
        "Name": lambda t: t.training_job,
        "CreationTime": lambda t: t.creation_time,
        "Status": tuner.training_status,
        "FinalObjectiveMetricValue": lambda t: t.objective,
    }
    key = keys[by]
    return lambda t: (key(t), t.training_job)


def _page(items: list[Any], body: dict[str, Any]) -> tuple[list[Any], dict[str, str]]:
    page, token = page_of(items, body.get("NextToken"), int(body.get("MaxResults", 10)), bad_token)
    return list(page), ({"NextToken": token} if token is not None else {})


def _kept(body: dict[str, Any]) -> dict[str, Any]:
    """The members of the request :data:`KEPT_TUNING` keeps (of its one training job
    definition, given as ``TrainingJobDefinition`` or as the one of ``TrainingJobDefinitions``,
    whose ``DefinitionName`` is kept too: the answers name it then)."""
    if not body.get("TrainingJobDefinition") and body.get("TrainingJobDefinitions"):
        one = body["TrainingJobDefinitions"][0]
        kept = kept_of({"TrainingJobDefinition": one}, KEPT_TUNING)
        return kept | {_DEFINITION_NAME: one.get("DefinitionName") or ""}
    return kept_of(body, KEPT_TUNING)
