"""Porting from the SageMaker Python SDK: its idioms work (a few of its arguments are mapped, a few
accepted with a note), and its other arguments are explained."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainops import Channel, JobSpec, SpecError, TrainingJob
from trainops.spec import CHANNEL_ARGUMENTS, ESTIMATOR_ARGUMENTS, NO_LOCAL_EFFECT, parse_spec
from trainops.spec._job import DEFAULT_CHANNEL

RENAMED = {
    "enable_managed_spot_training": "use_spot_instances",
    "max_retry_attempts": "retry_strategy.maximum_retry_attempts",
    "output_dir": "output_path",
    "s3_output_path": "output_path",
    "env": "environment",
    "metrics": "metric_definitions",
    "container_entry_point": "container_entrypoint",
    "container_arguments": "container_args",
}
NO_MEANING = [
    "volume_size",
    "sagemaker_session",
    "subnets",
    "volume_kms_key",
    "output_kms_key",
    "code_location",
]


def _problem(text: str) -> tuple[str, str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="job.yaml")
    [problem] = info.value.problems
    return problem


@pytest.mark.parametrize(("argument", "field"), sorted(RENAMED.items()))
def test_renamed_sdk_arguments_name_the_trainops_field(argument: str, field: str) -> None:
    path, reason = _problem(f"entry_point: train.py\n{argument}: 3600\n")
    assert path == f"{argument} (line 2)"
    assert reason.startswith("unknown field (a SageMaker SDK argument): use ")
    assert field in reason


@pytest.mark.parametrize("argument", NO_MEANING)
def test_aws_and_container_arguments_say_they_have_no_meaning(argument: str) -> None:
    path, reason = _problem(f"entry_point: train.py\n{argument}: x\n")
    assert path == f"{argument} (line 2)"
    assert "has no meaning in trainops" in reason or "runs no containers" in reason


def test_every_estimator_argument_is_explained_in_python_too() -> None:
    for argument, hint in ESTIMATOR_ARGUMENTS.items():
        with pytest.raises(SpecError) as info:
            TrainingJob(entry_point="train.py", **{argument: 1})
        assert info.value.problems == [
            (argument, f"unknown field (a SageMaker SDK argument): {hint}")
        ]


def test_hints_name_fields_that_exist() -> None:
    models = {"": JobSpec, "inputs.<channel>.": Channel}
    for table, prefix in ((ESTIMATOR_ARGUMENTS, ""), (CHANNEL_ARGUMENTS, "inputs.<channel>.")):
        for hint in table.values():
            if not hint.startswith("use ") or " " in hint.removeprefix("use ").split(" (")[0]:
                continue
            named = hint.removeprefix("use ").split(" ")[0]
            path = named.removeprefix("inputs.<channel>.") if prefix == "" else named
            model = Channel if named.startswith("inputs.<channel>.") else models[prefix]
            assert path.split(".")[0] in model.model_fields, hint


def test_channel_arguments_inside_a_channel() -> None:
    path, reason = _problem(
        "entry_point: train.py\ninputs:\n  train:\n    uri: s3://b/x/\n    compression_type: Gzip\n"
    )
    assert path == "inputs.train.compression_type (line 5)"
    assert "SageMaker SDK argument" in reason and "use compression (None or Gzip)" in reason


def test_unknown_non_sdk_fields_still_get_suggestions() -> None:
    _, reason = _problem("entry_point: train.py\nhyperparameter: {}\n")
    assert "did you mean 'hyperparameters'" in reason


def test_a_channel_given_as_a_plain_uri_is_a_file_channel() -> None:
    spec = parse_spec("entry_point: train.py\ninputs:\n  train: s3://bucket/train/\n")
    assert spec.inputs == {"train": Channel("s3://bucket/train/")}
    assert spec.inputs["train"].mode == "File"
    job = TrainingJob(entry_point="train.py", inputs={"train": "data/", "test": Channel("t/")})
    assert job.inputs["train"] == Channel("data/")
    from_path = TrainingJob(entry_point="train.py", inputs={"train": Path("data")})
    assert from_path.inputs["train"] == Channel("data")
    single = TrainingJob(entry_point="train.py", inputs="s3://bucket/all/")
    assert single.inputs == {DEFAULT_CHANNEL: Channel("s3://bucket/all/")}


def test_a_plain_uri_channel_is_still_checked() -> None:
    path, reason = _problem("entry_point: train.py\ninputs:\n  train: gs://b/x\n")
    assert path == "inputs.train.uri (line 3)" and "not supported" in reason


def test_local_instance_type_is_this_machine_at_no_cost() -> None:
    local = JobSpec(entry_point="train.py", instance_type="local").instance
    assert local.vcpus == os.cpu_count()
    expected_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    assert abs(local.memory_gib - expected_gib) < 0.1
    assert local.gpus == 0
    assert local.on_demand_usd_per_hour == 0.0 and local.cost_usd(3600, 4) == 0.0
    gpu = JobSpec(entry_point="train.py", instance_type="local_gpu").instance
    assert gpu.gpus >= 1 and gpu.vcpus == local.vcpus and gpu.on_demand_usd_per_hour == 0.0


def test_a_local_job_host_is_not_warned_that_it_is_smaller_than_itself() -> None:
    from trainops.agent.contract._resources import capacity_warnings, machine_memory_mb
    from trainops.protocol import HostResources

    for name in ("local", "local_gpu"):
        instance = JobSpec(entry_point="train.py", instance_type=name).instance
        warnings = capacity_warnings(
            instance,
            HostResources(gpus=list(range(instance.gpus)), memory_mb=machine_memory_mb()),
            machine_cpus=os.cpu_count() or 1,
            machine_memory=machine_memory_mb(),
            machine_gpus=instance.gpus,
        )
        assert warnings == []


def test_fit_arguments_are_validated_before_anything_is_submitted(tmp_path: Path) -> None:
    job = TrainingJob(entry_point="train.py")
    with pytest.raises(SpecError) as info:
        job.fit(inputs={"train": "gs://b/x"})
    assert info.value.problems[0][0] == "inputs.train.uri"
    with pytest.raises(SpecError, match="experiment_config"):
        job.fit(experiment_config={"ExperimentName": "x"})
    with pytest.raises(SpecError, match="job_name"):
        job.fit(job_name="not a name")
    assert job.name is None


def test_the_sdk_s_mapped_arguments_set_their_fields() -> None:
    spec = parse_spec(
        "entry_point: train.py\nmax_run: 60\nmax_wait: 120\nuse_spot_instances: true\n"
        "checkpoint_s3_uri: s3://b/ckpt/\ncheckpoint_local_path: /opt/ml/ckpt\n"
        "input_mode: Pipe\ninputs:\n  train: s3://b/train/\n"
        "  test: {uri: s3://b/test/, mode: File}\n"
        "metric_definitions:\n  - {Name: loss, Regex: 'loss=([0-9.]+)'}\n"
    )
    assert spec.stopping_condition.max_runtime_in_seconds == 60
    assert spec.stopping_condition.max_wait_time_in_seconds == 120
    assert spec.checkpoint is not None
    assert (spec.checkpoint.uri, spec.checkpoint.local_path) == ("s3://b/ckpt/", "/opt/ml/ckpt")
    assert [c.mode.value for c in spec.inputs.values()] == ["Pipe", "File"]
    assert [(m.name, m.regex) for m in spec.metric_definitions] == [("loss", "loss=([0-9.]+)")]
    assert spec.sagemaker_notes == ()


def test_a_mapped_argument_beside_its_field_must_agree() -> None:
    path, reason = _problem(
        "entry_point: train.py\nmax_run: 60\nstopping_condition: {max_runtime_in_seconds: 90}\n"
    )
    assert path.startswith("max_run")
    assert "sets stopping_condition.max_runtime_in_seconds, which is given too (as 90)" in reason
    same = parse_spec(
        "entry_point: train.py\nmax_run: 60\nstopping_condition: {max_runtime_in_seconds: 60}\n"
    )
    assert same.stopping_condition.max_runtime_in_seconds == 60


@pytest.mark.parametrize("argument", sorted(NO_LOCAL_EFFECT))
def test_arguments_without_local_effect_are_accepted_with_a_note(argument: str) -> None:
    spec = parse_spec(f"entry_point: train.py\n{argument}: x\n")
    [note] = spec.sagemaker_notes
    assert note.startswith(f"{argument} is accepted and not used: ")
    assert "\n" not in note
    assert spec.model_dump(mode="json") == parse_spec("entry_point: train.py\n").model_dump(
        mode="json"
    )


def test_the_estimator_s_input_mode_reaches_fit_s_channels() -> None:
    job = TrainingJob(
        entry_point="train.py", input_mode="FastFile", role="arn:aws:iam::1:role/r", max_run=30
    )
    assert job.latest_training_job is None and job.model_data is None  # before fit()
    assert job.sagemaker_notes[0].startswith("role is accepted and not used")
    run = job._for_run({"train": "s3://b/train/"}, None, None)
    assert run.inputs["train"].mode.value == "FastFile"
    assert run.stopping_condition.max_runtime_in_seconds == 30
