"""The ``sagemaker`` service: the training operations wired so far (CreateTrainingJob, whose
request ``_create.py`` maps to our spec, DescribeTrainingJob, ListTrainingJobs, StopTrainingJob;
UpdateTrainingJob in ``_update.py``, the tag operations in ``_tags.py``).

DescribeTrainingJob is derived from the REST describe (``server/_views.describe``, itself
derived from the one declaration, ``server/_schema``): :func:`api_description` adds what the API's
shape has and ours spells otherwise (the ARN, ``AlgorithmSpecification.TrainingInputMode``,
``DataSource.S3DataSource``), and the model's output shape then drops our extra keys and encodes
the timestamps (``_shapes.to_wire``).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from pydantic import ValidationError

from trainops._errors import JobNotFoundError, SpecError
from trainops._settings import Settings
from trainops.control import JobController, JobEndedError
from trainops.protocol import (
    ACCOUNT_ID,
    SubmittedJob,
    toolkit_value,
    training_job_arn,
    tuning_job_arn,
)
from trainops.server._redaction import Masker
from trainops.server._schema import KEPT, kept_of, split_trainops, with_kept
from trainops.server._views import describe, job_masker
from trainops.server.aws._create import code_uri_of, hyperparameters, spec_of
from trainops.server.aws._errors import AwsError
from trainops.server.aws._paging import page_of, within_windows
from trainops.server.aws._services import AwsOperation, AwsService
from trainops.server.aws._tags import MAX_TAGS, check_tags, tag_operations, too_many_tags
from trainops.server.aws._update import update_training_job
from trainops.spec import JobSpec
from trainops.store import (
    JobExistsError,
    JobRecord,
    MetadataStore,
    TagLimitError,
    TuningTrialRecord,
)
from trainops.tuning import OBJECTIVE_HYPERPARAMETER, Search

__all__ = [
    "ACCOUNT_ID",
    "api_describe",
    "api_description",
    "cli_describe",
    "masked_kept",
    "sagemaker_service",
    "training_job_arn",
    "tuning_job_arn",
]

_NOT_FOUND = "Requested resource not found."
_MAX_SCANNED = 100_000  # jobs a ListTrainingJobs call filters and sorts at most
_SORT_KEYS = {"Name": "name", "CreationTime": "creation_time", "Status": "status"}
_API_FILE_SYSTEMS = ("EFS", "FSxLustre")
_FILE_SYSTEM_ID = re.compile(r"fs-[0-9a-f]{8,17}")  # the model's pattern and its length (11-21)


def bad_token() -> AwsError:
    """A page token that is not one of ours, as the service words it."""
    return AwsError(400, "ValidationException", "Invalid pagination token")


def sagemaker_service(controller: JobController, settings: Settings) -> AwsService:
    """The SageMaker operations answered for ``controller``'s jobs."""
    from trainops.server.aws._tuning_ops import tuning_operations  # it builds on this module

    ops = _Operations(controller, settings)
    return AwsService.of(
        "sagemaker",
        "sagemaker",
        [
            AwsOperation("CreateTrainingJob", ops.create_training_job),
            AwsOperation("DescribeTrainingJob", ops.describe_training_job),
            AwsOperation("ListTrainingJobs", ops.list_training_jobs),
            AwsOperation("StopTrainingJob", ops.stop_training_job),
            *tuning_operations(controller, settings),
            AwsOperation("UpdateTrainingJob", update_training_job(ops)),
            *tag_operations(ops),
        ],
    )


def api_describe(
    store: MetadataStore, job: JobRecord, settings: Settings, now: float
) -> dict[str, Any]:
    """DescribeTrainingJob's answer for ``job`` (before the output shape puts it on the wire)."""
    described = describe(store, job, settings, now)
    trial = store.trial_of_job(job.name)  # a tuning job's trial: the service names its tuning job
    tuning = None if trial is None else tuning_job_arn(settings.region, trial.tuning_job)
    answer = api_description(described | {"TuningJobArn": tuning}, settings.region)
    kept = store.api_request("training-job", job.name)
    if trial is not None:  # made by the tuner from its tuning job's request: its kept members
        definition = store.api_request("hyper-parameter-tuning-job", trial.tuning_job)
        kept = trial_kept(definition.get("TrainingJobDefinition") or {}, trial, job.spec)
    return with_kept(answer, masked_kept(kept, job_masker(job.spec), "HyperParameters"))


def cli_describe(
    store: MetadataStore, job: JobRecord, settings: Settings, now: float
) -> dict[str, Any]:
    """What ``trainops describe`` prints: DescribeTrainingJob's members and nesting (timestamps
    as ISO strings, as the AWS CLI prints them) and, under ``Trainops``, what only trainops has
    (``_schema.TRAINOPS_ONLY``: hosts, cost, artifacts, ...)."""
    return split_trainops(api_describe(store, job, settings, now))


def trial_kept(
    definition: dict[str, Any], trial: TuningTrialRecord, spec: SubmittedJob
) -> dict[str, Any]:
    """What a trial's DescribeTrainingJob gives back of its tuning job's kept request: its
    members, and ``HyperParameters`` as the service gives a trial's: the static ones as the
    request sent them (JSON-encoded by the SDK, with its ``sagemaker_*`` entries: the SDK's
    ``best_estimator`` attaches to the trial and decodes each), the tuned values as
    TunedHyperParameters gives them, and the objective's name. A static value the trial runs
    with another value (Hyperband's resource at its maximum) is given as it runs."""
    # not a training job's members: its ResourceConfig is the instances the trial runs on
    apart = ("StaticHyperParameters", "HyperParameterTuningResourceConfig")
    kept = {k: v for k, v in definition.items() if k not in apart}
    sent = definition.get("StaticHyperParameters")
    if not isinstance(sent, dict):
        return kept
    runs = spec.hyperparameters
    static = {
        k: v if k not in runs or toolkit_value(v) == runs[k] else _text(runs[k])
        for k, v in sent.items()
        if k != OBJECTIVE_HYPERPARAMETER
    }
    tuned = Search.sagemaker_strings(trial.hyperparameters)
    objective = {k: str(runs[k]) for k in (OBJECTIVE_HYPERPARAMETER,) if k in runs}
    return kept | {"HyperParameters": static | tuned | objective}


def _text(value: Any) -> str:
    """A hyperparameter the trial runs with, as the API's text."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return Search.sagemaker_strings({"value": value})["value"]


def masked_kept(kept: dict[str, Any], mask: Masker, key: str) -> dict[str, Any]:
    """``kept`` with the hyperparameters at ``key`` masked as the describe masks them."""
    if not isinstance(kept.get(key), dict):
        return kept
    return kept | {key: mask.mapping(kept[key])}


def api_description(described: dict[str, Any], region: str) -> dict[str, Any]:
    """Our describe made DescribeTrainingJob's shape (keys the model lacks are dropped later)."""
    algorithm = dict(described.get("AlgorithmSpecification") or {})
    channels = [_api_channel(c) for c in described.get("InputDataConfig") or []]
    modes = {c.get("InputMode") for c in channels} - {None}
    algorithm.setdefault("TrainingInputMode", modes.pop() if len(modes) == 1 else "File")
    retry = described.get("RetryStrategy") or {}
    if not retry.get("MaximumRetryAttempts"):  # none asked for: the service leaves it out
        described = {k: v for k, v in described.items() if k != "RetryStrategy"}
    return described | {
        "TrainingJobArn": training_job_arn(region, described["TrainingJobName"]),
        "AlgorithmSpecification": algorithm,
        "InputDataConfig": channels or None,  # none: left out, as the service (min length 1)
        "ModelArtifacts": described.get("ModelArtifacts") or {"S3ModelArtifacts": ""},
        # the service's defaults, as it gives them back (the SDK's attach reads both)
        "ResourceConfig": {"VolumeSizeInGB": 30} | (described.get("ResourceConfig") or {}),
        "OutputDataConfig": {"KmsKeyId": ""} | (described.get("OutputDataConfig") or {}),
    }


def _api_channel(channel: dict[str, Any]) -> dict[str, Any]:
    mode = {"file": "File", "pipe": "Pipe", "fastfile": "FastFile"}.get(
        str(channel.get("InputMode") or "").lower()
    )
    distribution = {"FullyReplicated": "FullyReplicated", "ShardedByKey": "ShardedByS3Key"}
    fs = channel.get("FileSystem")
    if isinstance(fs, dict):  # a shared directory: the API's FileSystemDataSource, if it is one
        named = {"FileSystemDataSource": fs} if _api_file_system(fs) else {}
        return channel | {"InputMode": mode, "DataSource": named}
    source = {
        "S3DataType": channel.get("S3DataType") or "S3Prefix",
        "S3Uri": channel.get("Uri"),
        "S3DataDistributionType": distribution.get(str(channel.get("Distribution"))),
    }
    return channel | {"InputMode": mode, "DataSource": {"S3DataSource": source}}


def _api_file_system(fs: dict[str, Any]) -> bool:
    """Whether the API can name this file system: the service's FileSystemDataSource has all
    four members, an ``fs-`` id and an EFS or FSx for Lustre type. Another (a local or NFS
    path, no id) is trainops' own: the answer's DataSource is left empty and the REST describe
    (``Trainops`` in ``trainops describe``) shows it as ``FileSystem``."""
    return fs.get("FileSystemType") in _API_FILE_SYSTEMS and bool(
        _FILE_SYSTEM_ID.fullmatch(str(fs.get("FileSystemId") or ""))
    )


class _Operations:
    def __init__(self, controller: JobController, settings: Settings) -> None:
        self.controller, self.settings = controller, settings

    @property
    def store(self) -> MetadataStore:
        return self.controller.store

    def _job(self, name: str) -> JobRecord:
        job = self.store.get_job(name)
        if job is None:
            raise AwsError(400, "ValidationException", _NOT_FOUND)
        return job

    def arn(self, name: str) -> str:
        return training_job_arn(self.settings.region, name)

    def create_training_job(self, body: dict[str, Any]) -> dict[str, Any]:
        """The job, its tags and its kept request are recorded in one transaction: a job is never
        left without them, nor they without it."""
        name = body["TrainingJobName"]
        params = hyperparameters(body)
        code_uri = code_uri_of(params, body)
        tags = check_tags(body.get("Tags") or [])
        kept = kept_of(body, KEPT)

        def with_job(job: JobRecord) -> None:
            self.store.put_api_request("training-job", job.name, kept)
            self.store.put_tags("training-job", job.name, tags, MAX_TAGS)

        try:
            spec = JobSpec(**spec_of(body, params, self.settings.server.images))
            self.controller.submit(name, spec, code_uri, with_job=with_job)
        except TagLimitError as exc:
            raise too_many_tags(exc.count) from None
        except JobExistsError:
            arn = training_job_arn(self.settings.region, name)
            raise AwsError(
                400,
                "ResourceInUse",
                "Training job names must be unique within an AWS account and region, and a "
                f"training job with this name already exists ({arn})",
            ) from None
        except (SpecError, ValidationError) as exc:
            raise AwsError(400, "ValidationException", _one_line(exc)) from None
        return {"TrainingJobArn": training_job_arn(self.settings.region, name)}

    def describe_training_job(self, body: dict[str, Any]) -> dict[str, Any]:
        job = self._job(body["TrainingJobName"])
        return api_describe(self.store, job, self.settings, time.time())

    def stop_training_job(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body["TrainingJobName"]
        try:
            self.controller.stop(name)
        except JobNotFoundError:
            raise AwsError(400, "ValidationException", _NOT_FOUND) from None
        except JobEndedError:
            status = self._job(name).status
            raise AwsError(
                400,
                "ValidationException",
                f"The request was rejected because the training job is in status {status}.",
            ) from None
        return {}

    def list_training_jobs(self, body: dict[str, Any]) -> dict[str, Any]:
        jobs = self.store.list_jobs(
            statuses=[body["StatusEquals"]] if body.get("StatusEquals") else [],
            name_contains=body.get("NameContains"),
            created_after=_widened(body.get("CreationTimeAfter"), -1),
            created_before=_widened(body.get("CreationTimeBefore"), 1),
            limit=_MAX_SCANNED,
        )
        jobs = [j for j in jobs if within_windows(j.creation_time, j.last_modified_time, body)]
        if body.get("WarmPoolStatusEquals"):
            jobs = []  # no job here has a warm pool (trainops keeps none), so none has the status
        key = _SORT_KEYS[body.get("SortBy", "CreationTime")]
        descending = body.get("SortOrder", "Descending") == "Descending"
        jobs.sort(key=lambda j: (getattr(j, key), j.order), reverse=descending)
        page, token = page_of(
            jobs, body.get("NextToken"), int(body.get("MaxResults", 10)), bad_token
        )
        answer: dict[str, Any] = {"TrainingJobSummaries": [self._summary(j) for j in page]}
        if token is not None:
            answer["NextToken"] = token
        return answer

    def _summary(self, job: JobRecord) -> dict[str, Any]:
        return {
            "TrainingJobName": job.name,
            "TrainingJobArn": training_job_arn(self.settings.region, job.name),
            "CreationTime": job.creation_time,
            "TrainingEndTime": job.training_end_time,
            "LastModifiedTime": job.last_modified_time,
            "TrainingJobStatus": job.status,
            "SecondaryStatus": job.secondary_status,
        }


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:2000]


def _widened(bound: float | None, by_ms: int) -> float | None:
    return None if bound is None else bound + by_ms / 1000
