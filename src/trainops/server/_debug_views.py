"""The debugger keys of a job's description, as DescribeTrainingJob shows them.

``DebugHookConfig`` (``LocalPath``, ``S3OutputPath``: the base the tensors go under, as given or
the job's output path, with ``<job>/debug-output`` appended by the platform;
``HookParameters``; ``CollectionConfigurations``), ``DebugRuleConfigurations`` (each debugger
rule, built-in or custom, and its parameters, as strings like SageMaker's) and ``TensorBoardOutputConfig``
(``LocalPath``, ``S3OutputPath``). trainops adds ``DebugOutputPath``: the prefix the tensors are
synced to, which ``trainops.debugger.create_trial`` reads. A key is null where the job has no
such configuration.
"""

from __future__ import annotations

from typing import Any

from trainops.protocol import RuleSpec
from trainops.server._redaction import mask_text
from trainops.spec._debugger_catalog import CUSTOM
from trainops.storage import join_uri
from trainops.store import JobRecord

__all__ = ["RULE_LOCAL_PATH", "debug_sections"]

RULE_LOCAL_PATH = "/opt/ml/processing/output/rule/"  # SageMaker's, for the record


def debug_sections(job: JobRecord, default_output: str) -> dict[str, Any]:
    """DebugHookConfig, DebugOutputPath, DebugRuleConfigurations and TensorBoardOutputConfig."""
    spec = job.spec
    hook, board = spec.debugger_hook_config, spec.tensorboard_output_config
    base = spec.output_path or default_output
    return {
        "DebugHookConfig": (
            None
            if hook is None
            else hook.api_shape(
                hook.container_local_output_path, mask_text(hook.s3_output_path or base)
            )
        ),
        "DebugOutputPath": (
            None if hook is None else mask_text(hook.output_prefix(job.output_prefix, job.name))
        ),
        "DebugRuleConfigurations": [
            _rule(job, rule) for rule in (*spec.debugger_rules, *spec.custom_rules)
        ],
        "TensorBoardOutputConfig": (
            None
            if board is None
            else {
                "LocalPath": board.container_local_output_path,
                "S3OutputPath": mask_text(
                    board.s3_output_path or join_uri(job.output_prefix, "tensorboard")
                ),
            }
        ),
    }


def _rule(job: JobRecord, rule: RuleSpec) -> dict[str, Any]:
    parameters = {k: _text(v) for k, v in rule.rule_parameters.items() if v is not None}
    own = {"rule_to_invoke": rule.rule}
    if rule.source is not None:  # a custom rule: its file in the job's source archive
        own["source"] = rule.source
    return {
        "RuleConfigurationName": rule.name,
        "LocalPath": RULE_LOCAL_PATH,
        "S3OutputPath": mask_text(join_uri(job.output_prefix, "rule-output")),
        "RuleEvaluatorImage": f"trainops:{'custom' if _custom(rule) else rule.rule}",
        "RuleParameters": {**own, **parameters},
    }


def _custom(rule: RuleSpec) -> bool:
    """Whether ``rule`` is a custom rule, in either of its forms (``source`` beside its name, or
    ``rule: custom`` with ``source`` among its parameters, as SageMaker's ``Rule.custom``)."""
    return rule.kind == "custom" or rule.rule == CUSTOM


def _text(value: Any) -> str:
    """SageMaker keeps rule parameters as strings; a list is a comma list."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)
