"""Building a job's report from where its pieces live: the store, and the job's profiler prefix.

:func:`job_report` reads the job's record, transitions and rule evaluations from the metadata
store and its profiler data from object storage (the same for a running and a finished job),
and returns :func:`~trainops.report._data.report_data`'s dict. :func:`write_report` puts the
page and the JSON under a prefix, as the ProfilerReport rule leaves them
(``<output prefix>/rule-output/ProfilerReport/profiler-output/``).
"""

from __future__ import annotations

from typing import Any

from trainops._errors import JobNotFoundError, TrainopsError
from trainops._settings import Settings
from trainops.cost import job_spot_cost
from trainops.profiler import ProfilerReader, profiler_prefix
from trainops.report._data import report_data
from trainops.report._html import render_html, report_json
from trainops.spec import PROFILER_REPORT
from trainops.storage import join_uri, store_for
from trainops.store import JobRecord, MetadataStore

__all__ = [
    "REPORT_HTML",
    "REPORT_JSON",
    "NoProfilerDataError",
    "job_profiler_prefix",
    "job_report",
    "report_prefix",
    "write_report",
]

REPORT_HTML = "profiler-report.html"
REPORT_JSON = "profiler-report.json"


class NoProfilerDataError(TrainopsError):
    """The job has no profiler data (yet): nothing to report."""


def job_profiler_prefix(job: JobRecord) -> str:
    config = job.spec.profiler_config
    return profiler_prefix(config.s3_output_path if config else None, job.output_prefix)


def report_prefix(job: JobRecord) -> str:
    """Where the ProfilerReport rule leaves the report, SageMaker's layout:
    ``<output prefix>/rule-output/<the rule's name, ProfilerReport by default>/profiler-output``
    (beside the rules service's ``result.json`` of the same rule)."""
    name = next(
        (r.name for r in job.spec.profiler_rules if r.rule == PROFILER_REPORT), PROFILER_REPORT
    )
    return join_uri(job.output_prefix, "rule-output", name, "profiler-output")


def job_report(
    store: MetadataStore, settings: Settings, name: str, *, now: float | None = None
) -> dict[str, Any]:
    """The report data of job ``name``; :class:`JobNotFoundError`, or :class:`NoProfilerDataError`
    when nothing was recorded under its profiler prefix."""
    job = store.get_job(name)
    if job is None:
        raise JobNotFoundError(f"no job named {name!r}")
    prefix = job_profiler_prefix(job)
    reader = ProfilerReader(store_for(prefix, settings), prefix)
    reader.refresh()
    if not reader.series and not reader.meta:
        why = "" if job.spec.profiling else " (profiler_config is off for this job)"
        problem = f"; {reader.errors[0]}" if reader.errors else ""
        raise NoProfilerDataError(f"job {name!r} has no profiler data under {prefix}{why}{problem}")
    data = report_data(job, store.transitions(name), reader, store.rule_evaluations(name), now=now)
    data["cost"] = job_spot_cost(store, name, settings.spot, data["generated_at"]).to_json()
    return data


def write_report(settings: Settings, prefix: str, data: dict[str, Any]) -> tuple[str, str]:
    """Write the page and the JSON under ``prefix``; returns their URIs (page, JSON)."""
    objects = store_for(prefix, settings)
    page, document = join_uri(prefix, REPORT_HTML), join_uri(prefix, REPORT_JSON)
    objects.put_bytes(document, report_json(data).encode())
    objects.put_bytes(page, render_html(data).encode())
    return page, document
