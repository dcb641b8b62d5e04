"""The SageMaker SDK's debugger objects build a TrainingJob as the job spec's fields would."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from trainops import SpecError, TrainingJob
from trainops.sdk import (
    CollectionConfig,
    DebuggerHookConfig,
    ProfilerRule,
    Rule,
    TensorBoardOutputConfig,
    rule_configs,
)


def test_an_estimator_with_the_sdks_debugger_objects() -> None:
    job = TrainingJob(
        entry_point="train.py",
        debugger_hook_config=DebuggerHookConfig(
            s3_output_path="s3://bucket/debug",
            hook_parameters={"save_interval": "100"},
            collection_configs=[
                CollectionConfig(name="weights"),
                CollectionConfig(name="gradients", parameters={"save_histogram": "False"}),
            ],
        ),
        rules=[
            Rule.sagemaker(
                rule_configs.vanishing_gradient(),
                rule_parameters={"threshold": "0.0001"},
                actions=rule_configs.ActionList(rule_configs.StopTraining()),
            ),
            Rule.sagemaker(rule_configs.loss_not_decreasing(), name="loss-flat"),
            ProfilerRule.sagemaker(rule_configs.CPUBottleneck(threshold=90)),
        ],
        tensorboard_output_config=TensorBoardOutputConfig(s3_output_path="s3://bucket/tb"),
    )
    view = job.view()
    assert [(r.name, r.kind) for r in view.rules] == [
        ("VanishingGradient", "debugger"),
        ("loss-flat", "debugger"),
        ("CPUBottleneck", "profiler"),
    ]
    assert view.rules[0].rule_parameters == {"threshold": 0.0001}
    assert [a.type for a in view.rules[0].actions] == ["stop_training"]
    assert view.rules[2].rule_parameters["threshold"] == 90
    hook = view.debugger_hook_config
    assert hook is not None and hook.s3_output_path == "s3://bucket/debug"
    # The job's gradients config wins over VanishingGradient's; LossNotDecreasing adds losses.
    assert [(c.name, dict(c.parameters)) for c in hook.collection_configs] == [
        ("losses", {"save_interval": "500"}),
        ("weights", {}),
        ("gradients", {"save_histogram": "false"}),
    ]
    assert view.profiling is not None  # the profiler rule turned it on


def test_similar_across_runs_takes_the_other_trial_from_the_sdk_argument() -> None:
    rule = Rule.sagemaker(
        rule_configs.similar_across_runs(), other_trials_s3_output_paths=["s3://b/other"]
    )
    assert rule.rule_parameters["other_trials"] == "s3://b/other"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: Rule.sagemaker(rule_configs.CPUBottleneck()), "use ProfilerRule.sagemaker"),
        (lambda: ProfilerRule.sagemaker(rule_configs.dead_relu()), "use Rule.sagemaker"),
        (lambda: Rule.sagemaker({"rule": "Nope"}), "'Nope' is not a built-in rule"),
        (lambda: Rule.sagemaker({}), "not a rule_configs base configuration"),
        (
            lambda: Rule.sagemaker(rule_configs.dead_relu(), collections_to_save=["x"]),
            "configure collections in debugger_hook_config",
        ),
        (lambda: rule_configs.Email("a@b.c"), "use a webhook or command action"),
        (lambda: rule_configs.StopTraining("other-"), "trainops stops the rule's own job"),
        (
            lambda: Rule.sagemaker(rule_configs.dead_relu(), rule_parameters={"x": 1}),
            "DeadRelu has no parameter 'x'",
        ),
    ],
)
def test_misuse_is_refused_clearly(make: Callable[[], object], expected: str) -> None:
    with pytest.raises(SpecError) as info:
        make()
    assert expected in str(info.value)


def test_turning_the_hook_off_beside_debugger_rule_objects_is_refused() -> None:
    with pytest.raises(SpecError, match="debugger_hook_config: is false"):
        TrainingJob(
            entry_point="train.py",
            rules=[Rule.sagemaker(rule_configs.dead_relu())],
            debugger_hook_config=False,
        )
