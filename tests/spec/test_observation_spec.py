"""profiler_config, rules and tensorboard_output_config: SDK names, defaults, clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainops import JobSpec, SpecError
from trainops.protocol import SubmittedJob
from trainops.spec import PROFILER_RULES, check_rule_parameters, parse_spec, resolve_paths


def spec(**fields: Any) -> JobSpec:
    return JobSpec(entry_point="train.py", **fields)


def problems(**fields: Any) -> str:
    with pytest.raises(SpecError) as info:
        spec(**fields)
    return str(info.value)


def test_no_profiler_by_default_and_rules_turn_it_on() -> None:
    assert spec().view().profiling is None
    job = spec(rules=["StepOutlier"]).view()
    assert job.profiling is not None
    assert job.profiling.system_monitor_interval_millis == 500  # SageMaker's default
    assert job.rules[0].name == "StepOutlier"
    assert job.rules[0].rule_parameters == {
        "stddev": 3,
        "mode": None,
        "n_outliers": 10,
        "scan_interval_us": 60_000_000,
    }


def test_framework_profile_defaults_follow_the_sdk() -> None:
    params = spec(profiler_config={"framework_profile_params": {}}).view().profiling
    assert params is not None and params.framework_profile_params is not None
    framework = params.framework_profile_params
    assert framework.local_path == "/opt/ml/output/profiler"
    assert framework.file_max_size == 10 * 1024 * 1024 and framework.file_close_interval == 60
    windows = [
        framework.detailed_profiling_config,
        framework.dataloader_profiling_config,
        framework.python_profiling_config,
    ]
    assert [(w.start_step, w.num_steps) for w in windows if w] == [(5, 1), (7, 1), (9, 3)]
    python = framework.python_profiling_config
    assert python is not None
    assert (python.python_profiler, python.cprofile_timer) == ("cprofile", "total_time")


def test_a_window_on_the_framework_profile_applies_to_all_three() -> None:
    config = {"framework_profile_params": {"start_step": 20, "num_steps": 4}}
    framework = spec(profiler_config=config).view().profiler_config
    assert framework is not None and framework.framework_profile_params is not None
    params = framework.framework_profile_params
    for window in (params.detailed_profiling_config, params.python_profiling_config):
        assert window is not None and (window.start_step, window.num_steps) == (20, 4)
        assert window.covers_step(23) and not window.covers_step(24)


def test_only_the_given_sub_configs_run_and_a_time_window_stays_a_time_window() -> None:
    config = {
        "framework_profile_params": {
            "detailed_profiling_config": {"start_unix_time": 1_800_000_000, "duration": 30},
            "python_profiling_config": {"python_profiler": "PYINSTRUMENT"},
        }
    }
    params = spec(profiler_config=config).view().profiler_config
    assert params is not None and params.framework_profile_params is not None
    framework = params.framework_profile_params
    assert framework.dataloader_profiling_config is None
    detailed = framework.detailed_profiling_config
    assert detailed is not None and detailed.by_time and detailed.start_step is None
    assert detailed.covers_time(1_800_000_010, job_start=0)
    python = framework.python_profiling_config
    assert python is not None and (python.start_step, python.num_steps) == (9, 3)
    assert python.python_profiler == "pyinstrument"


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        (
            {"profiler_config": {"system_monitor_interval_millis": 300}},
            "system_monitor_interval_millis: 300 is not an interval SageMaker offers; use one "
            "of 100, 200, 500, 1000, 5000, 60000",
        ),
        (
            {"profiler_config": {"framework_profile_params": {"start_step": 1, "duration": 5}}},
            "give start_step/num_steps or start_unix_time/duration, not both",
        ),
        (
            {"profiler_config": {"framework_profile_params": {"local_path": "/tmp/x"}}},
            "must be a directory under /opt/ml/",
        ),
        (
            {"rules": ["CPUBottlenek"]},
            "'CPUBottlenek' is not a built-in rule; profiler rules: BatchSize",
        ),
        (
            {"rules": [{"rule": "CPUBottleneck", "rule_parameters": {"treshold": 5}}]},
            "CPUBottleneck has no parameter 'treshold'; its parameters: cpu_threshold",
        ),
        (
            {"rules": [{"rule": "StepOutlier", "rule_parameters": {"n_outliers": 2.5}}]},
            "StepOutlier.n_outliers must be a whole number",
        ),
        (
            {"rules": [{"rule": "StepOutlier", "rule_parameters": {"mode": "train-ish"}}]},
            "StepOutlier.mode must be one of TRAIN, EVAL, GLOBAL or null",
        ),
        (
            {"rules": [{"rule": "ProfilerReport", "rule_parameters": {"Nope_threshold": 1}}]},
            "override a rule's parameter as <RuleName>_<parameter>",
        ),
        (
            {"rules": [{"rule": "ProfilerReport", "rule_parameters": {"CPUBottleneck_x": 1}}]},
            "CPUBottleneck_x: CPUBottleneck has no parameter 'x'",
        ),
        ({"rules": ["StepOutlier", "StepOutlier"]}, "rule names must be unique; repeated"),
        (
            {"rules": ["StepOutlier"], "profiler_config": {"disable_profiler": True}},
            "profiler rules need the profiler",
        ),
        (
            {"rules": [{"rule": "StepOutlier", "actions": [{"webhook": "ftp://x/y"}]}]},
            "'ftp://x/y' is not an http:// or https:// URL",
        ),
        (
            {"rules": [{"rule": "StepOutlier", "actions": [{"type": "command"}]}]},
            "a command action needs argv",
        ),
        (
            {"rules": [{"rule": "StepOutlier", "actions": ["email"]}]},
            "rules.0.actions.0.type",
        ),
        (
            {"tensorboard_output_config": {"container_local_output_path": "/var/tb"}},
            "container_local_output_path: must be a directory under /opt/ml/",
        ),
        ({"disable_profiler": True}, "use profiler_config.disable_profiler"),
    ],
)
def test_bad_settings_name_the_field(fields: dict[str, Any], fragment: str) -> None:
    assert fragment in problems(**fields)


def test_actions_in_the_sdk_and_short_spellings() -> None:
    rule = {
        "rule": "StepOutlier",
        "actions": [
            "StopTraining",
            {"webhook": "https://hooks.example.com/T0/B0/secret"},
            {"command": ["notify-send", "step outliers"]},
            {"type": "webhook", "url": "http://127.0.0.1:9/x", "timeout_seconds": 2},
        ],
    }
    actions = spec(rules=[rule]).view().rules[0].actions
    assert [a.type for a in actions] == ["stop_training", "webhook", "command", "webhook"]
    assert actions[2].argv == ("notify-send", "step outliers")
    assert actions[3].timeout_seconds == 2


def test_profiler_report_overrides_are_checked_and_kept() -> None:
    resolved = check_rule_parameters("ProfilerReport", {"CPUBottleneck_threshold": 90})
    assert resolved["CPUBottleneck_threshold"] == 90
    assert set(PROFILER_RULES) >= {"BatchSize", "Dataloader", "ProfilerReport"}
    assert len(PROFILER_RULES) == 12


def test_the_stored_view_round_trips() -> None:
    job = spec(
        rules=[{"rule": "ProfilerReport", "name": "report", "actions": ["stop_training"]}],
        profiler_config={"framework_profile_params": {}, "s3_output_path": "file:///tmp/p"},
        tensorboard_output_config={"s3_output_path": "file:///tmp/tb"},
    )
    dump = job.model_dump(mode="json")
    view = SubmittedJob.from_json(dump)
    assert view.to_json() == dump
    assert view == job.view()


def test_relative_output_paths_are_resolved_against_the_spec(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    parsed = parse_spec(
        "entry_point: train.py\n"
        "profiler_config: {s3_output_path: prof/}\n"
        "tensorboard_output_config: {s3_output_path: tb/}\n"
    )
    resolved = resolve_paths(parsed, tmp_path)
    assert resolved.profiler_config is not None and resolved.tensorboard_output_config is not None
    assert resolved.profiler_config.s3_output_path == (tmp_path / "prof").as_uri() + "/"
    assert resolved.tensorboard_output_config.s3_output_path == (tmp_path / "tb").as_uri() + "/"
