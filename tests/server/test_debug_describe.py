"""describe's debugger keys (DebugHookConfig, DebugRuleConfigurations, TensorBoardOutputConfig),
computed from a real store as DescribeTrainingJob shows them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops._settings import Settings
from trainops.server import describe
from trainops.spec import JobSpec
from trainops.store import MetadataStore


def _described(tmp_path: Path, **fields: Any) -> dict[str, Any]:
    store = MetadataStore(tmp_path / "trainops.db")
    try:
        job = store.create_job(
            name="job-a",
            spec=JobSpec(entry_point="train.py", **fields).view(),
            code_uri="file:///code.tar.gz",
            output_prefix="s3://bucket/out/job-a",
            max_attempts=1,
            status="InProgress",
            secondary_status="Starting",
            message="starting",
            now=100.0,
        )
        return describe(store, job, Settings.load(), 100.0)
    finally:
        store.close()


def test_a_job_without_the_debugger_shows_null_keys(tmp_path: Path) -> None:
    found = _described(tmp_path)
    assert found["DebugHookConfig"] is None and found["DebugOutputPath"] is None
    assert found["DebugRuleConfigurations"] == [] and found["TensorBoardOutputConfig"] is None


def test_debugger_keys_in_describe_training_jobs_shape(tmp_path: Path) -> None:
    found = _described(
        tmp_path,
        output_path="s3://bucket/out",
        rules=[
            {"rule": "loss_not_decreasing", "rule_parameters": {"collection_names": "losses,x"}},
            "StepOutlier",
        ],
        debugger_hook_config={"hook_parameters": {"save_interval": 10}},
        tensorboard_output_config={},
    )
    assert found["DebugHookConfig"] == {
        "LocalPath": "/opt/ml/output/tensors",
        "S3OutputPath": "s3://bucket/out",
        "HookParameters": {"save_interval": "10"},
        "CollectionConfigurations": [
            {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}}
        ],
    }
    assert found["DebugOutputPath"] == "s3://bucket/out/job-a/debug-output"
    (rule,) = found["DebugRuleConfigurations"]
    assert rule["RuleConfigurationName"] == "LossNotDecreasing"
    assert rule["RuleEvaluatorImage"] == "trainops:LossNotDecreasing"
    assert rule["RuleParameters"] == {
        "rule_to_invoke": "LossNotDecreasing",
        "collection_names": "losses,x",
        "use_losses_collection": "True",
        "num_steps": "10",
        "diff_percent": "0.1",
        "increase_threshold_percent": "5.0",
    }
    assert [r["RuleConfigurationName"] for r in found["ProfilerRuleConfigurations"]] == [
        "StepOutlier"
    ]
    assert found["TensorBoardOutputConfig"] == {
        "LocalPath": "/opt/ml/output/tensorboard",
        "S3OutputPath": "s3://bucket/out/job-a/tensorboard",
    }


def test_credentials_in_a_uri_are_masked(tmp_path: Path) -> None:
    hook = {"s3_output_path": "s3://AKIAEXAMPLE:secretkey@bucket/dbg"}
    found = _described(tmp_path, debugger_hook_config=hook)
    shown = str(found["DebugHookConfig"]) + str(found["DebugOutputPath"])
    assert "secretkey" not in shown


def test_a_custom_rule_is_listed_with_its_source_and_class(tmp_path: Path) -> None:
    custom = {
        "name": "my-check",
        "source": "rules/check.py",
        "rule_to_invoke": "MyCheck",
        "rule_parameters": {"threshold": 0.5},
    }
    found = _described(tmp_path, rules=[custom])
    (rule,) = found["DebugRuleConfigurations"]
    assert rule["RuleEvaluatorImage"] == "trainops:custom"
    assert rule["RuleParameters"] == {
        "rule_to_invoke": "MyCheck",
        "source": "rules/check.py",
        "threshold": "0.5",
    }
    assert found["DebugHookConfig"] is not None


def test_a_custom_rule_in_the_sdks_rule_custom_form_is_listed_as_custom(tmp_path: Path) -> None:
    custom = {
        "rule": "custom",
        "name": "my-check",
        "rule_parameters": {"source": "rules/check.py", "rule_to_invoke": "MyCheck"},
    }
    found = _described(tmp_path, rules=[custom])
    (rule,) = found["DebugRuleConfigurations"]
    assert rule["RuleEvaluatorImage"] == "trainops:custom"
    assert rule["RuleParameters"]["rule_to_invoke"] == "MyCheck"
    assert rule["RuleParameters"]["source"] == "rules/check.py"
