"""The ``monitoring`` service (CloudWatch metrics): GetMetricStatistics and ListMetrics on the
namespace ``/aws/sagemaker/TrainingJobs`` with the dimension ``TrainingJobName``, read from the
store's metric points, as the SageMaker SDK's ``TrainingJobAnalytics`` reads a job's metric time
series (statistic ``Average`` over 60-second periods, by default).

The pinned botocore speaks JSON 1.0 to CloudWatch (the first protocol of the model's list that
it supports: ``_protocols.py``); the errors are the service's (``InvalidParameterCombination``,
``InvalidParameterValue``, their JSON names ending in ``Exception``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from trainops._settings import Settings
from trainops.control import JobController
from trainops.server.aws._errors import AwsError
from trainops.server.aws._services import AwsOperation, AwsService
from trainops.store import MetadataStore

__all__ = ["MAX_DATAPOINTS", "NAMESPACE", "metrics_service"]

NAMESPACE = "/aws/sagemaker/TrainingJobs"
DIMENSION = "TrainingJobName"
MAX_DATAPOINTS = 1440  # the service's limit of one answer
_PAGE = 500  # metrics in one ListMetrics answer, as the service pages them
_MAX_JOBS = 100_000
_PERCENTILE = re.compile(r"p(\d{1,2}(\.\d{1,2})?|100)")


def metrics_service(controller: JobController, settings: Settings) -> AwsService:
    """CloudWatch metrics as far as the SDKs read a training job's metrics."""
    ops = _Operations(controller)
    return AwsService.of(
        "monitoring",
        "cloudwatch",
        [
            AwsOperation("GetMetricStatistics", ops.get_metric_statistics),
            AwsOperation("ListMetrics", ops.list_metrics),
        ],
    )


def _combination(message: str) -> AwsError:
    return AwsError(400, "InvalidParameterCombinationException", message)


def _value(message: str) -> AwsError:
    return AwsError(400, "InvalidParameterValueException", message)


def _job_of(dimensions: Iterable[dict[str, Any]] | None) -> str | None:
    """The training job a metric's dimensions name (``None``: they name none, or more)."""
    given = list(dimensions or [])
    if len(given) != 1 or given[0].get("Name") != DIMENSION:
        return None
    value = given[0].get("Value")
    return value if isinstance(value, str) else None


class _Operations:
    def __init__(self, controller: JobController) -> None:
        self.controller = controller

    @property
    def store(self) -> MetadataStore:
        return self.controller.store

    def get_metric_statistics(self, body: dict[str, Any]) -> dict[str, Any]:
        statistics, extended = body.get("Statistics"), body.get("ExtendedStatistics")
        if (statistics is None) == (extended is None):
            raise _combination(
                "Must specify either Statistics or ExtendedStatistics, but not both."
            )
        for name in extended or []:
            if not _PERCENTILE.fullmatch(name):
                raise _value(
                    f"The value {name[:40]} for parameter ExtendedStatistics is not valid."
                )
        start, end, period = float(body["StartTime"]), float(body["EndTime"]), int(body["Period"])
        if start >= end:
            raise _value("The parameter StartTime must be less than the parameter EndTime.")
        wanted = math.ceil((end - start) / period)
        if wanted > MAX_DATAPOINTS:
            raise _combination(
                f"You have requested up to {wanted} datapoints, which exceeds the limit of "
                f"{MAX_DATAPOINTS}. You may reduce the datapoints requested by increasing "
                "Period, or decreasing the time range."
            )
        answer: dict[str, Any] = {"Label": body["MetricName"], "Datapoints": []}
        job = _job_of(body.get("Dimensions"))
        if body["Namespace"] != NAMESPACE or job is None:
            return answer
        points = [p for p in self.store.metrics(job, body["MetricName"]) if start <= p.ts < end]
        buckets: dict[int, list[float]] = {}
        for point in points:
            buckets.setdefault(int((point.ts - start) // period), []).append(point.value)
        answer["Datapoints"] = [
            _datapoint(start + index * period, values, statistics or [], extended or [])
            for index, values in sorted(buckets.items())
        ]
        return answer

    def list_metrics(self, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = {"Metrics": []}
        if body.get("Namespace", NAMESPACE) != NAMESPACE:
            return answer
        filters = body.get("Dimensions") or []
        if len(filters) > 1 or any(f.get("Name") != DIMENSION for f in filters):
            return answer  # our metrics have the one dimension
        named = filters[0].get("Value") if filters else None
        if named is not None:
            jobs = [named]
        else:
            jobs = sorted(j.name for j in self.store.list_jobs(limit=_MAX_JOBS))
        start = _start(body.get("NextToken"), jobs)
        for index in range(start, len(jobs)):
            names = sorted({p.name for p in self.store.final_metrics(jobs[index])})
            answer["Metrics"] += [
                {
                    "Namespace": NAMESPACE,
                    "MetricName": name,
                    "Dimensions": [{"Name": DIMENSION, "Value": jobs[index]}],
                }
                for name in names
                if body.get("MetricName") in (None, name)
            ]
            if len(answer["Metrics"]) >= _PAGE and index + 1 < len(jobs):
                answer["NextToken"] = jobs[index + 1]
                break
        return answer


def _start(token: str | None, jobs: list[str]) -> int:
    """Where a page starts: at the job the token names (the first one after it, if it went)."""
    if token is None:
        return 0
    return next((i for i, job in enumerate(jobs) if job >= token), len(jobs))


def _datapoint(
    at: float, values: list[float], statistics: list[str], extended: list[str]
) -> dict[str, Any]:
    found: dict[str, Any] = {"Timestamp": at, "Unit": "None"}
    every = {
        "SampleCount": float(len(values)),
        "Average": sum(values) / len(values),
        "Sum": sum(values),
        "Minimum": min(values),
        "Maximum": max(values),
    }
    found |= {name: every[name] for name in statistics}
    if extended:
        ordered = sorted(values)
        found["ExtendedStatistics"] = {name: _percentile(ordered, name) for name in extended}
    return found


def _percentile(ordered: list[float], name: str) -> float:
    """The nearest-rank percentile ``name`` (``p90``, ``p99.9``) of ``ordered``."""
    rank = math.ceil(float(name[1:]) / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]
