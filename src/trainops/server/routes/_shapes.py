"""The JSON schemas that the public routes' answers share (a job, its description, amounts).

They only describe answers in the OpenAPI document; the handlers build the answers themselves
(``server/_views.py``).
"""

from __future__ import annotations

from typing import Any

from trainops.backends import Capacity

__all__ = [
    "AMOUNTS",
    "API",
    "DESCRIBED",
    "INTEGER",
    "JOB",
    "STRING",
    "SUBMITTED",
    "amounts",
    "json_object",
]

API = "/api/v1"


def json_object(*required: str, **properties: Any) -> dict[str, Any]:
    """The schema of an object with these ``required`` keys and ``properties``."""
    return {"type": "object", "required": list(required), "properties": properties}


def amounts(capacity: Capacity) -> dict[str, int]:
    """A capacity as the API answers it (``cpus``, ``memory_mb``, ``gpus``)."""
    return {"cpus": capacity.cpus, "memory_mb": capacity.memory_mb, "gpus": capacity.gpus}


STRING = {"type": "string"}
INTEGER = {"type": "integer"}
AMOUNTS = json_object("cpus", "memory_mb", "gpus", cpus=INTEGER, memory_mb=INTEGER, gpus=INTEGER)
JOB = json_object(
    "TrainingJobName",
    "TrainingJobStatus",
    "SecondaryStatus",
    TrainingJobName=STRING,
    TrainingJobStatus=STRING,
    SecondaryStatus=STRING,
)
_RULE_STATUS = json_object(
    "RuleConfigurationName",
    "RuleEvaluationStatus",
    "StatusDetails",
    "LastModifiedTime",
    RuleConfigurationName=STRING,
    RuleEvaluationStatus={
        "type": "string",
        "enum": ["InProgress", "NoIssuesFound", "IssuesFound", "Error"],
    },
    StatusDetails=STRING,
    LastModifiedTime=STRING,
    Evaluation={
        "type": "object",
        "description": "the rule, its recommendation, evidence and what its actions did",
    },
)
_DEBUG_RULE_STATUS = json_object(
    *_RULE_STATUS["required"],
    "RuleEvaluationJobArn",
    **_RULE_STATUS["properties"],
    RuleEvaluationJobArn=STRING,
)
DESCRIBED = json_object(
    *JOB["required"],
    **JOB["properties"],
    ProfilerRuleEvaluationStatuses={"type": "array", "items": _RULE_STATUS},
    DebugRuleEvaluationStatuses={"type": "array", "items": _DEBUG_RULE_STATUS},
) | {"description": "the job, with the keys of SageMaker's DescribeTrainingJob"}
SUBMITTED = json_object(
    *DESCRIBED["required"],
    **DESCRIBED["properties"],
    Warnings={
        "type": "array",
        "items": STRING,
        "description": "what the job will not get where it runs (private namespaces, /opt/ml) "
        "and why, one line each; empty when it gets all it asks for",
    },
) | {"description": "the job as submitted, with the keys of SageMaker's DescribeTrainingJob"}
