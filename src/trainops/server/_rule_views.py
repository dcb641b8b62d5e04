"""The rule keys of a job's description, as DescribeTrainingJob shows them.

``ProfilerRuleConfigurations`` (each rule and its parameters, as strings like SageMaker's),
``ProfilerRuleEvaluationStatuses`` (where each rule stands: ``RuleConfigurationName``,
``RuleEvaluationStatus``, ``StatusDetails``, ``LastModifiedTime``, and trainops' own
``Evaluation``: the rule, its recommendation, evidence and what its actions did) and
``ProfilingStatus``. A rule the rules service has not evaluated yet shows as InProgress.
The debugger rules of the job (built-in, kind ``debugger``, and custom) are shown the same way under
``DebugRuleEvaluationStatuses`` (:func:`debugger_sections`), each with a
``RuleEvaluationJobArn`` naming its evaluation as SageMaker names a rule's processing job
(``<job>-<rule>``, in the server's region and account; trainops evaluates rules in the control
plane, not in processing jobs: the name is stable, no job of that name exists).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from trainops.protocol import processing_job_arn
from trainops.server._redaction import mask_text
from trainops.store import JobRecord, MetadataStore, RuleEvaluation

__all__ = ["debugger_sections", "profiler_sections"]

_KIND = "profiler"
_DEBUGGER = "debugger"
_CUSTOM = "custom"


def debugger_sections(
    store: MetadataStore, job: JobRecord, iso: Callable[[float | None], str | None], region: str
) -> dict[str, Any]:
    """``DebugRuleEvaluationStatuses``: where each debugger rule of ``job`` stands, the
    built-in ones and then the custom ones (its own rule classes), as SageMaker lists both."""
    kinds = (_DEBUGGER, _CUSTOM)
    rows = {row.name: row for row in store.rule_evaluations(job.name) if row.kind in kinds}
    statuses = []
    for rule in (*job.spec.debugger_rules, *job.spec.custom_rules):
        row = rows.get(rule.name)
        status = _status(row, iso) if row else _pending(rule.name, rule.rule, job, iso)
        arn = processing_job_arn(region, f"{job.name}-{rule.name}")
        statuses.append({"RuleConfigurationName": rule.name, "RuleEvaluationJobArn": arn} | status)
    return {"DebugRuleEvaluationStatuses": statuses}


def profiler_sections(
    store: MetadataStore, job: JobRecord, iso: Callable[[float | None], str | None]
) -> dict[str, Any]:
    spec = job.spec
    rows = {row.name: row for row in store.rule_evaluations(job.name) if row.kind == _KIND}
    statuses = []
    for rule in spec.profiler_rules:
        row = rows.get(rule.name)
        statuses.append(_status(row, iso) if row else _pending(rule.name, rule.rule, job, iso))
    return {
        "ProfilerConfig": _profiler_config(job),
        "ProfilingStatus": "Enabled" if spec.profiling is not None else "Disabled",
        "ProfilerRuleConfigurations": [
            {
                "RuleConfigurationName": rule.name,
                "RuleEvaluatorImage": f"trainops:{rule.rule}",
                "RuleParameters": {
                    "rule_to_invoke": rule.rule,
                    **{k: _text(v) for k, v in rule.rule_parameters.items()},
                },
            }
            for rule in spec.profiler_rules
        ],
        "ProfilerRuleEvaluationStatuses": statuses,
    }


def _profiler_config(job: JobRecord) -> dict[str, Any] | None:
    """The job's ``ProfilerConfig`` as CreateTrainingJob gave it: ``S3OutputPath`` is the base
    the job's ``<job>/profiler-output`` prefix is under (``_update.profiler_config``)."""
    config = job.spec.profiler_config
    if config is None:
        return None
    path, suffix = config.s3_output_path, f"/{job.name}/profiler-output"
    if path is not None and path.endswith(suffix):
        path = path[: -len(suffix)] + "/"
    return {
        "S3OutputPath": path,
        "ProfilingIntervalInMilliseconds": config.system_monitor_interval_millis,
        "DisableProfiler": config.disable_profiler,
    }


def _text(value: Any) -> str:
    """SageMaker keeps rule parameters as strings."""
    return value if isinstance(value, str) else json.dumps(value)


def _status(row: RuleEvaluation, iso: Callable[[float | None], str | None]) -> dict[str, Any]:
    result = row.result
    latest = result.get("result") or {}
    found = result.get("found") or {}
    # Once issues were found, show the finding unless the latest evaluation found them too.
    still = latest.get("status") == "IssuesFound"
    shown = found if row.status == "IssuesFound" and not still else latest
    output = result.get("output")
    return {
        "RuleConfigurationName": row.name,
        "RuleEvaluationStatus": row.status,
        "StatusDetails": mask_text(row.status_details),
        "LastModifiedTime": iso(row.last_modified_time),
        "Evaluation": {
            "Rule": row.rule,
            "Recommendation": shown.get("recommendation", ""),
            "Evidence": shown.get("evidence", {}),
            "FoundTime": iso(result.get("found_time")),
            "Actions": [
                {
                    "Type": a.get("type"),
                    "Ok": a.get("ok"),
                    "Detail": mask_text(str(a.get("detail"))),
                }
                for a in result.get("actions") or []
            ],
            "Evaluations": result.get("evaluations", 0),
            "Output": mask_text(output) if isinstance(output, str) else None,
        },
    }


def _pending(
    name: str, rule: str, job: JobRecord, iso: Callable[[float | None], str | None]
) -> dict[str, Any]:
    return {
        "RuleConfigurationName": name,
        "RuleEvaluationStatus": "InProgress",
        "StatusDetails": "not evaluated yet",
        "LastModifiedTime": iso(job.creation_time),
        "Evaluation": {
            "Rule": rule,
            "Recommendation": "",
            "Evidence": {},
            "FoundTime": None,
            "Actions": [],
            "Evaluations": 0,
            "Output": None,
        },
    }
