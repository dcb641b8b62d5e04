"""The JSON shapes of the public API, computed from store records (DescribeTrainingJob keys).

Kept apart from the routes so the data can be tested and reused (CLI, web UI) without HTTP.
"""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime
from typing import Any

from trainops._settings import Settings
from trainops.cost import job_cost, prices_of
from trainops.protocol import SubmittedJob
from trainops.server._debug_views import debug_sections
from trainops.server._redaction import Masker, redact
from trainops.server._rule_views import debugger_sections, profiler_sections
from trainops.server._schema import Shown, rest_sections
from trainops.store import ArtifactRecord, HostRecord, JobRecord, LogChunk, MetadataStore

__all__ = [
    "LISTED_DETAILS",
    "describe",
    "iso",
    "listed_details",
    "log_page",
    "metric_points",
    "redact",
    "spec_sections",
    "summary",
]

PAGE_CHARS = 8 * 1024 * 1024  # characters of log lines in one page of GET .../logs

_JOB_LEVEL_ARTIFACTS = ("model", "output")
_PART_ARTIFACTS = ("model_part", "output_part")


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="milliseconds")


def summary(job: JobRecord) -> dict[str, Any]:
    return {
        "TrainingJobName": job.name,
        "TrainingJobStatus": job.status,
        "SecondaryStatus": job.secondary_status,
        "CreationTime": iso(job.creation_time),
        "TrainingEndTime": iso(job.training_end_time),
        "LastModifiedTime": iso(job.last_modified_time),
        "InstanceType": job.spec.instance_type,
        "InstanceCount": job.spec.instance_count,
        "FailureReason": _masked(job.failure_reason, job_masker(job.spec)),
    }


def job_masker(spec: SubmittedJob) -> Masker:
    """What masks a job's secrets in everything shown of it (see ``_redaction``)."""
    return Masker.for_job(spec.environment, spec.hyperparameters)


def describe(
    store: MetadataStore, job: JobRecord, settings: Settings, now: float
) -> dict[str, Any]:
    """Everything about one job, as DescribeTrainingJob shows it."""
    spec = job.spec
    artifacts = store.artifacts(job.name)
    mask = job_masker(spec)
    return {
        "TrainingJobName": job.name,
        "TrainingJobStatus": job.status,
        "SecondaryStatus": job.secondary_status,
        "FailureReason": _masked(job.failure_reason, mask),
        "CreationTime": iso(job.creation_time),
        "TrainingStartTime": iso(job.training_start_time),
        "TrainingEndTime": iso(job.training_end_time),
        "LastModifiedTime": iso(job.last_modified_time),
        "SecondaryStatusTransitions": [
            {"Status": t.status, "StartTime": iso(t.start_time), "EndTime": iso(t.end_time)}
            | {"StatusMessage": _masked(t.message, mask)}
            for t in store.transitions(job.name)
        ],
        **_spec_sections(spec, settings, mask),
        "ModelArtifacts": _model_artifacts(artifacts),
        "Artifacts": _artifact_list(artifacts),
        "FinalMetricDataList": [
            {"MetricName": m.name, "Value": m.value, "Timestamp": iso(m.ts)}
            for m in store.final_metrics(job.name)
        ],
        "TrainingTimeInSeconds": job.training_seconds,
        "BillableTimeInSeconds": job.billable_seconds,
        **_spot(job),
        "Cost": _cost(job, now, settings),
        "Attempt": job.attempt,
        "Hosts": [_host(h) for h in store.hosts(job.name, job.attempt)],
        **profiler_sections(store, job, iso),
        **debug_sections(job, settings.default_output_uri),
        **debugger_sections(store, job, iso, settings.region),
    }


def _spot(job: JobRecord) -> dict[str, Any]:
    """Managed spot: the interruptions so far and, once the job has ended,
    the savings as the SageMaker SDK prints them: (1 - billable / training) x 100."""
    savings = None
    training, billable = job.training_seconds, job.billable_seconds
    if job.spec.use_spot_instances and training and billable is not None:
        savings = round((1.0 - billable / training) * 100.0, 1)
    return {
        "Interruptions": job.interruptions,
        "ManagedSpotTrainingSavings": savings,
    }


def spec_sections(spec: SubmittedJob, settings: Settings) -> dict[str, Any]:
    """The sections of DescribeTrainingJob a job's spec declares (hyperparameters, algorithm,
    resources, channels, output, checkpoint, stopping, retry, environment), its secrets masked:
    what a tuning job's training job definition shows before any trial runs."""
    return _spec_sections(spec, settings, job_masker(spec))


def _spec_sections(spec: SubmittedJob, settings: Settings, mask: Masker) -> dict[str, Any]:
    """The keys the spec's fields give, derived from their one declaration (``_schema``)."""
    return rest_sections(spec, Shown(mask, lambda: settings.default_output_uri))


def _model_artifacts(artifacts: list[ArtifactRecord]) -> dict[str, str] | None:
    models = sorted((a for a in artifacts if a.name == "model"), key=lambda a: a.host != "")
    return {"S3ModelArtifacts": models[0].uri} if models else None


def _artifact_list(artifacts: list[ArtifactRecord]) -> list[dict[str, str]]:
    out = []
    for artifact in artifacts:
        if artifact.name in _PART_ARTIFACTS:
            continue
        entry = {"Name": artifact.name, "Uri": artifact.uri}
        if artifact.host and artifact.name not in _JOB_LEVEL_ARTIFACTS:
            entry["Host"] = artifact.host
        out.append(entry)
    return out


def _cost(job: JobRecord, now: float, settings: Settings) -> dict[str, Any]:
    """Billable seconds x price x count; while running, the time so far (``job_cost``). The
    same seconds at the spot price (the catalog's estimate or the user's: ``SpotPriceKind``);
    ``trainops cost`` says more (interruptions, the checkpoint interval)."""
    cost = job_cost(job, now)
    prices = prices_of(job.spec.instance_type, settings.spot)
    spot_usd = cost.seconds / 3600.0 * prices.spot_usd_per_hour * cost.instance_count
    return {
        "Currency": cost.currency,
        "OnDemandUsdPerHour": cost.usd_per_hour,
        "InstanceCount": cost.instance_count,
        "EstimatedCostUsd": round(cost.usd, 6),
        "PricesAsOf": cost.prices_as_of,
        "Region": cost.region,
        "SpotUsdPerHour": prices.spot_usd_per_hour,
        "SpotPriceKind": prices.spot_kind,
        "EstimatedSpotCostUsd": round(spot_usd, 6),
    }


def _host(host: HostRecord) -> dict[str, Any]:
    status = host.outcome if host.exited else (host.phase or host.state)
    found: dict[str, Any] = {
        "Host": host.host,
        "Status": status,
        "ExitCode": host.exit_code,
        "Attempt": host.attempt,
    }
    if host.node is not None:  # the machine it ran on, as the backend names it
        found["Node"] = host.node
    if len(host.ranks) > 1:  # a host of several ranks: how each of them exited
        found["Ranks"] = [{"Rank": r["rank"], "ExitCode": r["exit_code"]} for r in host.ranks]
    return found


def _masked(text: str | None, mask: Masker) -> str | None:
    return None if text is None else mask(text)


def log_page(
    chunks: list[LogChunk], after: int, job: JobRecord, *, runs: bool = False
) -> dict[str, Any]:
    """A page of log lines, masked by the rule of _redaction.py (with the job's secrets).

    A page holds at most :data:`PAGE_CHARS` characters of lines (always at least one line), so
    10,000 lines of up to 1 MiB each never make a gigabyte answer; ``next`` says where the
    following page starts. With ``runs``, lines that share host, stream, rank and time come as
    one run (``{"cursor": first, ..., "lines": [...]}``) instead of an object each.
    """
    mask = job_masker(job.spec)
    chunks = _within_page(chunks)
    texts = iter(mask.lines([line for chunk in chunks for line in chunk.lines]))
    found = []
    for chunk in chunks:
        run = {
            "cursor": chunk.first,
            "host": chunk.host,
            "stream": chunk.stream,
            "timestamp": iso(chunk.ts),
            "lines": list(itertools.islice(texts, len(chunk.lines))),
        }
        found.append(run if chunk.rank is None else run | {"rank": chunk.rank})
    last = chunks[-1] if chunks else None
    page: dict[str, Any] = {"runs": found} if runs else {"lines": _one_each(found)}
    return page | {
        "next": last.first + len(last.lines) - 1 if last else after,
        "TrainingJobStatus": job.status,
        "SecondaryStatus": job.secondary_status,
    }


def _one_each(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines of ``runs``, one object each (the default shape of a page)."""
    lines = []
    for run in runs:
        first, rank = run["cursor"], {} if "rank" not in run else {"rank": run["rank"]}
        shared = {"host": run["host"], "stream": run["stream"], "timestamp": run["timestamp"]}
        lines += [
            {"cursor": first + i} | shared | {"line": text} | rank
            for i, text in enumerate(run["lines"])
        ]
    return lines


def _within_page(chunks: list[LogChunk]) -> list[LogChunk]:
    total = 0
    for index, chunk in enumerate(chunks):
        for count, line in enumerate(chunk.lines):
            total += len(line)
            if total > PAGE_CHARS and (index > 0 or count > 0):
                head = dataclasses.replace(chunk, lines=chunk.lines[:count])
                return [*chunks[:index], head] if count else chunks[:index]
    return chunks


def metric_points(store: MetadataStore, job: str, name: str | None) -> dict[str, Any]:
    return {
        "metrics": [
            {"MetricName": m.name, "Value": m.value, "Timestamp": iso(m.ts), "Host": m.host}
            for m in store.metrics(job, name)
        ]
    }


#: Describe's keys a listing can add to each of its jobs (``GET /jobs?include=``).
LISTED_DETAILS = ("Cost", "FinalMetricDataList", "Hosts")


def listed_details(
    store: MetadataStore,
    jobs: list[JobRecord],
    settings: Settings,
    now: float,
    include: list[str],
) -> list[dict[str, Any]]:
    """For each of ``jobs``, the keys of ``include`` (of :data:`LISTED_DETAILS`) as describe
    gives them: the cost from the record itself, the final metrics of the whole page in one
    query, the hosts of the whole page in another."""
    finals = (
        store.final_metrics_of([j.name for j in jobs]) if "FinalMetricDataList" in include else {}
    )
    hosts = store.hosts_of([(j.name, j.attempt) for j in jobs]) if "Hosts" in include else {}
    found = []
    for job in jobs:
        extra: dict[str, Any] = {}
        if "Cost" in include:
            extra["Cost"] = _cost(job, now, settings)
        if "FinalMetricDataList" in include:
            extra["FinalMetricDataList"] = [
                {"MetricName": m.name, "Value": m.value, "Timestamp": iso(m.ts)}
                for m in finals[job.name]
            ]
        if "Hosts" in include:
            extra["Hosts"] = [_host(h) for h in hosts[job.name]]
        found.append(extra)
    return found
