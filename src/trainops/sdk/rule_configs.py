"""The SageMaker SDK's ``rule_configs``: built-in rules' base configurations and actions.

As ``smdebug_rulesconfig`` names them: a debugger rule is a function
(``rule_configs.vanishing_gradient()``), a profiler rule a class taking its parameters
(``rule_configs.CPUBottleneck(threshold=90)``); either goes to :meth:`Rule.sagemaker` or
:meth:`ProfilerRule.sagemaker` (``trainops.sdk``). Actions: ``StopTraining()`` (the rule's own
job) and ``ActionList(*actions)``; ``Email`` and ``SMS`` (Amazon SNS) have no meaning here: a
``webhook`` or ``command`` action in the job spec notifies instead.
"""

from __future__ import annotations

from typing import Any

from trainops._errors import SpecError

__all__ = [
    "SMS",
    "ActionList",
    "BatchSize",
    "CPUBottleneck",
    "Dataloader",
    "Email",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "OverallFrameworkMetrics",
    "OverallSystemUsage",
    "ProfilerReport",
    "StepOutlier",
    "StopTraining",
    "all_zero",
    "check_input_images",
    "class_imbalance",
    "confusion",
    "dead_relu",
    "exploding_tensor",
    "loss_not_decreasing",
    "nlp_sequence_ratio",
    "overfit",
    "overtraining",
    "poor_weight_initialization",
    "saturated_activation",
    "similar_across_runs",
    "stalled_training_rule",
    "tensor_variance",
    "unchanged_tensor",
    "vanishing_gradient",
    "weight_update_ratio",
]


def _base(name: str) -> dict[str, Any]:
    return {"rule": name, "rule_parameters": {}}


def vanishing_gradient() -> dict[str, Any]:
    return _base("VanishingGradient")


def exploding_tensor() -> dict[str, Any]:
    return _base("ExplodingTensor")


def poor_weight_initialization() -> dict[str, Any]:
    return _base("PoorWeightInitialization")


def saturated_activation() -> dict[str, Any]:
    return _base("SaturatedActivation")


def dead_relu() -> dict[str, Any]:
    return _base("DeadRelu")


def weight_update_ratio() -> dict[str, Any]:
    return _base("WeightUpdateRatio")


def all_zero() -> dict[str, Any]:
    return _base("AllZero")


def class_imbalance() -> dict[str, Any]:
    return _base("ClassImbalance")


def loss_not_decreasing() -> dict[str, Any]:
    return _base("LossNotDecreasing")


def overfit() -> dict[str, Any]:
    return _base("Overfit")


def overtraining() -> dict[str, Any]:
    return _base("Overtraining")


def similar_across_runs() -> dict[str, Any]:
    return _base("SimilarAcrossRuns")


def stalled_training_rule() -> dict[str, Any]:
    return _base("StalledTrainingRule")


def tensor_variance() -> dict[str, Any]:
    return _base("TensorVariance")


def unchanged_tensor() -> dict[str, Any]:
    return _base("UnchangedTensor")


def check_input_images() -> dict[str, Any]:
    return _base("CheckInputImages")


def nlp_sequence_ratio() -> dict[str, Any]:
    return _base("NLPSequenceRatio")


def confusion() -> dict[str, Any]:
    return _base("Confusion")


class _ProfilerRuleConfig(dict[str, Any]):
    """A profiler rule's base configuration with the parameters given (checked by the spec)."""

    def __init__(self, **rule_parameters: Any) -> None:
        super().__init__(rule=type(self).__name__, rule_parameters=rule_parameters)


class BatchSize(_ProfilerRuleConfig):
    pass


class CPUBottleneck(_ProfilerRuleConfig):
    pass


class Dataloader(_ProfilerRuleConfig):
    pass


class GPUMemoryIncrease(_ProfilerRuleConfig):
    pass


class IOBottleneck(_ProfilerRuleConfig):
    pass


class LoadBalancing(_ProfilerRuleConfig):
    pass


class LowGPUUtilization(_ProfilerRuleConfig):
    pass


class MaxInitializationTime(_ProfilerRuleConfig):
    pass


class OverallFrameworkMetrics(_ProfilerRuleConfig):
    pass


class OverallSystemUsage(_ProfilerRuleConfig):
    pass


class ProfilerReport(_ProfilerRuleConfig):
    pass


class StepOutlier(_ProfilerRuleConfig):
    pass


def StopTraining(training_job_prefix: str | None = None) -> str:
    """Stop the rule's job when the rule first finds an issue."""
    if training_job_prefix is not None:
        raise SpecError(
            [
                (
                    "actions",
                    "StopTraining(training_job_prefix=...): trainops stops the rule's own job",
                )
            ]
        )
    return "stop_training"


def Email(email_address: str) -> str:
    del email_address
    raise SpecError([("actions", _NO_SNS)])


def SMS(phone_number: str) -> str:
    del phone_number
    raise SpecError([("actions", _NO_SNS)])


_NO_SNS = (
    "Email and SMS go through Amazon SNS, which trainops has not: use a webhook or command "
    "action in the job spec ({webhook: URL} or {command: [argv]})"
)


def ActionList(*actions: Any) -> list[Any]:
    """The actions, in order, for ``Rule.sagemaker(..., actions=...)``."""
    return list(actions)
