"""The one declaration of a job's fields in the SageMaker API (``_schema``), checked against the
spec models, the botocore model and what the describe views really show."""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from botocore.model import Shape
from botocore.validate import ParamValidator

from tests.server.aws.test_conformance import SAMPLES
from trainops._settings import Settings
from trainops.server import _schema, _views, describe
from trainops.server._redaction import MASK, Masker
from trainops.server._schema import (
    KEPT,
    KEPT_TUNING,
    MEMBERS,
    NOT_IN_API,
    NOT_MAPPED_REQUEST,
    TRAINOPS_KEY,
    TRAINOPS_ONLY,
    UNSUPPORTED_DESCRIBE,
    VIEW_KEYS,
    Member,
    Shown,
    at_path,
    declared_spec,
    kept_of,
    rest_sections,
    split_trainops,
    with_kept,
)
from trainops.server.aws import service_model
from trainops.server.aws._create import hyperparameters, spec_of
from trainops.server.aws._sagemaker import api_describe, cli_describe
from trainops.server.aws._shapes import to_wire
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore, TuningTrialRecord

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.1-cpu-py310"
RULES_IMAGE = "503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest"

#: A value for every member that CreateTrainingJob maps and DescribeTrainingJob shows: sent at
#: the member's request path, it must come back (as a part of the answer) at its response path.
SENT: dict[str, Any] = {
    "hyperparameters": {"epochs": "3", "lr": "0.1"},
    "container_entrypoint": ["/bin/bash"],
    "container_args": ["/opt/ml/input/data/sm_drivers/sm_train.sh"],
    "instance_type": "ml.c5.xlarge",
    "instance_count": 2,
    "environment": {"MODE": "fast"},
    "inputs": [
        {
            "ChannelName": "train",
            "InputMode": "Pipe",
            "CompressionType": "Gzip",
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": "s3://bucket/train/",
                    "S3DataDistributionType": "ShardedByS3Key",
                }
            },
        }
    ],
    "output_path": "s3://bucket/elsewhere/",
    "disable_output_compression": "NONE",
    "checkpoint.uri": "s3://bucket/ckpt/",
    "checkpoint.local_path": "/opt/ml/ckpt",
    "metric_definitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
    "stopping_condition.max_runtime_in_seconds": 1234,
    "stopping_condition.max_wait_time_in_seconds": 2345,
    "retry_strategy.maximum_retry_attempts": 3,
    "use_spot_instances": True,
    "profiler_config": {
        "S3OutputPath": "s3://bucket/prof/",
        "ProfilingIntervalInMilliseconds": 1000,
    },
    "rules": [
        {
            "RuleConfigurationName": "CPUBottleneck-1",
            "RuleEvaluatorImage": RULES_IMAGE,
            "RuleParameters": {"rule_to_invoke": "CPUBottleneck"},
        }
    ],
}


#: What the describe shows otherwise than the request sent it, and why.
SHOWN_OTHERWISE: dict[str, str] = {
    "RuleEvaluatorImage": "trainops evaluates the rules itself: the describe names trainops:<rule>",
}


def _round_tripped(member: Member) -> bool:
    return member.create != "ignored" and None not in (member.request, member.response)


def _request() -> dict[str, Any]:
    request: dict[str, Any] = copy.deepcopy(SAMPLES["CreateTrainingJob"])
    request["HyperParameters"]["sagemaker_submit_directory"] = "s3://bucket/code.tar.gz"
    for member in MEMBERS:
        if _round_tripped(member) and member.request is not None:
            *sections, last = member.request.split(".")
            into = request
            for section in sections:
                into = into.setdefault(section, {})
            value = copy.deepcopy(SENT[member.spec])
            into[last] = (into.get(last) or {}) | value if isinstance(value, dict) else value
    return request


def _stored(store: MetadataStore, request: dict[str, Any]) -> JobRecord:
    """The job as CreateTrainingJob makes it (its spec, and the members it keeps)."""
    spec = JobSpec(**spec_of(request, hyperparameters(request)))
    store.put_api_request("training-job", request["TrainingJobName"], kept_of(request, KEPT))
    return store.create_job(
        name=request["TrainingJobName"],
        spec=spec.view(),
        code_uri="s3://bucket/code.tar.gz",
        output_prefix="s3://bucket/out/my-job-1",
        max_attempts=1,
        status="InProgress",
        secondary_status="Starting",
        message="starting",
        now=100.0,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(tmp_path / "trainops.db")
    yield opened
    opened.close()


def _contains(found: Any, sent: Any) -> bool:
    """Whether ``found`` holds everything of ``sent`` (dicts may hold more)."""
    if isinstance(sent, dict):
        return isinstance(found, dict) and all(
            _contains(found.get(k), v) for k, v in sent.items() if k not in SHOWN_OTHERWISE
        )
    if isinstance(sent, list):
        return (
            isinstance(found, list)
            and len(found) == len(sent)
            and all(_contains(f, s) for f, s in zip(found, sent, strict=True))
        )
    return bool(found == sent)


def test_a_value_sent_comes_back_where_it_is_declared(store: MetadataStore) -> None:
    assert {m.spec for m in MEMBERS if _round_tripped(m)} == set(SENT)
    job = _stored(store, _request())
    settings = Settings.load()
    output = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    answer = to_wire(api_describe(store, job, settings, 200.0), output)
    ours = describe(store, job, settings, 200.0)
    for member in MEMBERS:
        if member.rest is not None:
            *parents, key = member.rest.split(".")
            section = at_path(ours, ".".join(parents)) if parents else ours
            assert key in section, f"{member.spec}: the REST describe has no {member.rest}"
        if _round_tripped(member):
            assert member.response is not None
            found, sent = at_path(answer, member.response), SENT[member.spec]
            assert _contains(found, sent), f"{member.spec}: sent {sent!r}, described {found!r}"


def _leaves(model: type[pydantic.BaseModel], prefix: str = "") -> Iterator[str]:
    """Every field path of ``model``; a field holding models (alone, in a list or a mapping)
    gives its own path and those of its models' fields."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path
        for nested in _models_in(field.annotation):
            yield from _leaves(nested, f"{path}.")


def _models_in(annotation: Any) -> list[type[pydantic.BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None and not isinstance(annotation, types.UnionType):
        return []
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _unplaced(paths: list[str], declared: set[str]) -> list[str]:
    """The paths neither declared nor inside a declared section; a section is placed by its
    fields (it needs no entry of its own when one of its fields has one: the others are
    checked each)."""
    return [
        path
        for path in paths
        if not any(path == d or path.startswith(f"{d}.") for d in declared)
        and not any(d.startswith(f"{path}.") for d in declared)
    ]


def test_every_spec_field_has_a_place_in_the_api_or_says_why_not() -> None:
    declared = {m.spec for m in MEMBERS} | set(NOT_IN_API)
    unplaced = _unplaced(list(_leaves(JobSpec)), declared)
    assert unplaced == [], f"declare these in _schema.MEMBERS or NOT_IN_API: {unplaced}"
    assert not {m.spec for m in MEMBERS} & set(NOT_IN_API)


def test_a_section_with_an_undeclared_field_is_caught() -> None:
    class Section(pydantic.BaseModel):
        placed: int = 0
        new_field: int = 0

    class Spec(pydantic.BaseModel):
        section: Section | None = None

    paths = list(_leaves(Spec))
    assert paths == ["section", "section.placed", "section.new_field"]
    assert _unplaced(paths, {"section.placed"}) == ["section.new_field"]
    assert _unplaced(paths, {"section"}) == []
    assert _unplaced(paths, set()) == paths


def test_every_describe_member_is_produced_or_marked_unsupported(store: MetadataStore) -> None:
    output = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    produced = set(api_describe(store, _stored(store, _request()), Settings.load(), 200.0))
    members = set(output.members)
    missing = members - produced - set(UNSUPPORTED_DESCRIBE)
    assert missing == set(), f"produce these in describe or add to UNSUPPORTED_DESCRIBE: {missing}"
    assert produced & set(UNSUPPORTED_DESCRIBE) == set()
    assert set(UNSUPPORTED_DESCRIBE) <= members  # no stale names


def _has_path(shape: Shape, path: str) -> bool:
    for part in path.split("."):
        if shape.type_name == "map":
            shape = shape.value
            continue
        if shape.type_name == "list":
            shape = shape.member
        members = getattr(shape, "members", {})
        if part not in members:
            return False
        shape = members[part]
    return True


def test_every_declared_path_is_the_model_s() -> None:
    model = service_model("sagemaker")
    request = model.operation_model("CreateTrainingJob").input_shape
    response = model.operation_model("DescribeTrainingJob").output_shape
    for member in MEMBERS:
        assert member.request is None or _has_path(request, member.request), member.request
        assert member.response is None or _has_path(response, member.response), member.response
    assert not _has_path(response, "ResourceConfig.NoSuchMember")


def test_derived_members_leave_defaults_where_the_request_is_silent() -> None:
    assert declared_spec({"EnableManagedSpotTraining": False, "Environment": {}}) == {}
    found = declared_spec({"StoppingCondition": {"MaxRuntimeInSeconds": 60}, "Bogus": 1})
    assert found == {"stopping_condition": {"max_runtime_in_seconds": 60}}


def test_hostile_shapes_leave_the_spec_s_defaults() -> None:
    hostile = {
        "ResourceConfig": ["ml.m5.large"],
        "StoppingCondition": "3600",
        "CheckpointConfig": None,
        "OutputDataConfig": {"S3OutputPath": ""},
    }
    assert declared_spec(hostile) == {}
    assert at_path({"a": "text"}, "a.b.c") is None


def test_every_create_member_is_mapped_or_marked_not_mapped() -> None:
    request = service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    mapped = {m.request.split(".")[0] for m in MEMBERS if m.request and m.create != "ignored"}
    mapped |= {path.split(".")[0] for path in KEPT}
    members = set(request.members)
    missing = members - mapped - {m.request for m in MEMBERS if m.request} - set(NOT_MAPPED_REQUEST)
    assert missing == set(), f"map these in _schema.MEMBERS or add to NOT_MAPPED_REQUEST: {missing}"
    assert mapped & set(NOT_MAPPED_REQUEST) == set()
    assert set(NOT_MAPPED_REQUEST) <= members  # no stale names


def test_a_trial_names_its_tuning_job_and_a_plain_job_none(store: MetadataStore) -> None:
    job = _stored(store, _request())
    assert api_describe(store, job, Settings.load(), 200.0)["TuningJobArn"] is None
    store.create_tuning_job("Tuner-A", {}, "s3://bucket/code.tar.gz", 100.0)
    store.add_trial(
        TuningTrialRecord(
            tuning_job="Tuner-A",
            number=1,
            training_job=job.name,
            hyperparameters={},
            status="InProgress",
            creation_time=100.0,
        )
    )
    settings = dataclasses.replace(Settings.load(), region="eu-west-1")
    found = api_describe(store, job, settings, 200.0)
    arn = "arn:aws:sagemaker:eu-west-1:000000000000:hyper-parameter-tuning-job/tuner-a"
    assert found["TuningJobArn"] == arn


def test_every_kept_path_is_the_model_s_on_both_sides() -> None:
    model = service_model("sagemaker")
    for create, described, paths in (
        ("CreateTrainingJob", "DescribeTrainingJob", KEPT),
        ("CreateHyperParameterTuningJob", "DescribeHyperParameterTuningJob", KEPT_TUNING),
    ):
        request = model.operation_model(create).input_shape
        response = model.operation_model(described).output_shape
        for path in paths:
            assert _has_path(request, path), f"{create} has no {path}"
            assert _has_path(response, path), f"{described} has no {path}"


def test_what_the_request_sent_comes_back_as_sent(store: MetadataStore) -> None:
    request = _request()
    request["HyperParameters"] |= {"sagemaker_program": '"train.py"', "label": '"a b"'}
    request["ResourceConfig"]["VolumeSizeInGB"] = 77
    request["OutputDataConfig"]["KmsKeyId"] = "alias/mine"
    job = _stored(store, request)
    output = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    answer = to_wire(api_describe(store, job, Settings.load(), 200.0), output)
    for path in KEPT:
        assert at_path(answer, path) == at_path(request, path), path
    # the spec keeps them unwrapped and without the framework's entries; the API as sent
    assert job.spec.hyperparameters["label"] == "a b"
    assert "sagemaker_program" not in job.spec.hyperparameters


def test_kept_hyperparameters_are_masked_as_the_describe_masks_them(store: MetadataStore) -> None:
    request = _request()
    request["HyperParameters"] |= {"db_password": '"s3cret-value"', "note": '"s3cret-value"'}
    job = _stored(store, request)
    answer = api_describe(store, job, Settings.load(), 200.0)
    shown = answer["HyperParameters"]
    assert "s3cret-value" not in str(answer)
    assert shown["db_password"] == MASK  # a secret by its name
    assert shown["note"] == f'"{MASK}"'  # a secret's value, inside the JSON string sent


def test_a_job_made_otherwise_keeps_its_spec_s_hyperparameters_and_the_defaults(
    store: MetadataStore,
) -> None:
    request = _request()
    job = store.create_job(
        name="rest-job",
        spec=JobSpec(**spec_of(request, hyperparameters(request))).view(),
        code_uri="s3://bucket/code.tar.gz",
        output_prefix="s3://bucket/out/rest-job",
        max_attempts=1,
        status="InProgress",
        secondary_status="Starting",
        message="starting",
        now=100.0,
    )
    answer = api_describe(store, job, Settings.load(), 200.0)
    assert "RoleArn" not in answer and "TrainingImage" not in answer["AlgorithmSpecification"]
    assert answer["HyperParameters"] == {"epochs": "3", "lr": "0.1"}
    assert answer["ResourceConfig"]["VolumeSizeInGB"] == 30
    assert answer["OutputDataConfig"]["KmsKeyId"] == ""


def test_kept_members_merge_into_the_answer_s_sections() -> None:
    answer = {"ResourceConfig": {"InstanceCount": 2, "VolumeSizeInGB": 30}, "Name": "a"}
    kept = {"ResourceConfig": {"VolumeSizeInGB": 5}, "RoleArn": "arn:role"}
    assert with_kept(answer, kept) == {
        "ResourceConfig": {"InstanceCount": 2, "VolumeSizeInGB": 5},
        "Name": "a",
        "RoleArn": "arn:role",
    }
    assert kept_of({"A": {"B": 1}, "C": None}, ["A.B", "C", "D.E"]) == {"A": {"B": 1}}
    assert kept_of({"A": "text"}, ["A.B"]) == {}


def describe_errors(printed: dict[str, Any]) -> str:
    """What botocore's validator finds wrong in ``printed`` (``trainops describe``'s JSON) minus
    its ``Trainops`` section, checked against DescribeTrainingJob's output shape: an unknown
    member, a wrong type or nesting, a missing required member ("" where none)."""
    output = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    api = {k: v for k, v in printed.items() if k != TRAINOPS_KEY}
    report = ParamValidator().validate(api, output)
    return str(report.generate_report()) if report.has_errors() else ""


def test_the_cli_s_describe_minus_trainops_is_the_api_s_shape(store: MetadataStore) -> None:
    printed = cli_describe(store, _stored(store, _request()), Settings.load(), 200.0)
    assert describe_errors(printed) == ""
    own = printed[TRAINOPS_KEY]
    assert {"Hosts", "Cost", "Artifacts", "Attempt"} <= set(own)
    assert own["AlgorithmSpecification"] == {"EntryPoint": "train.py"}
    assert own["InputDataConfig"][0]["Uri"] == "s3://bucket/train/"
    assert printed["TrainingJobArn"].endswith(":training-job/my-job-1")
    assert printed["CreationTime"].startswith("1970-01-01T00:01:40")  # ISO, as the AWS CLI prints
    assert printed["RoleArn"] == SAMPLES["CreateTrainingJob"]["RoleArn"]
    assert "FailureReason" not in printed  # absent members are left out, as the API leaves them


def test_an_undeclared_rest_key_fails_the_shape_check(store: MetadataStore) -> None:
    described = api_describe(store, _stored(store, _request()), Settings.load(), 200.0)
    described["ResourceConfig"]["Gpus"] = 1
    assert 'Unknown parameter in ResourceConfig: "Gpus"' in describe_errors(
        split_trainops(described)
    )


def test_every_trainops_only_path_is_not_the_model_s() -> None:
    response = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    for path in TRAINOPS_ONLY:
        assert not _has_path(response, path.replace("[]", "")), path


def test_split_moves_list_items_parts_and_leaves_the_rest() -> None:
    described = {
        "TrainingJobName": "j",
        "FailureReason": None,
        "InputDataConfig": [{"ChannelName": "a", "Uri": "s3://b/a"}, {"ChannelName": "b"}],
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "Hosts": [],
    }
    assert split_trainops(described) == {
        "TrainingJobName": "j",
        "InputDataConfig": [{"ChannelName": "a"}, {"ChannelName": "b"}],
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        TRAINOPS_KEY: {"InputDataConfig": [{"Uri": "s3://b/a"}, {}], "Hosts": []},
    }
    assert split_trainops({"TrainingJobName": "j"}) == {"TrainingJobName": "j"}


def test_a_debugger_job_s_cli_describe_is_the_api_s_shape(store: MetadataStore) -> None:
    spec = JobSpec(
        entry_point="train.py",
        output_path="s3://bucket/out",
        rules=[{"rule": "loss_not_decreasing"}, "StepOutlier"],
        debugger_hook_config={"hook_parameters": {"save_interval": 10}},
        tensorboard_output_config={},
        inputs={
            "train": {"uri": "s3://bucket/train/", "distribution": "sharded"},
            "shared": {
                "file_system": {"directory_path": "/mnt/data", "id": "fs-0123456789", "type": "EFS"}
            },
        },
    )
    job = store.create_job(
        name="dbg",
        spec=spec.view(),
        code_uri="file:///code.tar.gz",
        output_prefix="s3://bucket/out/dbg",
        max_attempts=1,
        status="Failed",
        secondary_status="Failed",
        message="it broke",
        now=100.0,
    )
    printed = cli_describe(store, job, Settings.load(), 200.0)
    assert describe_errors(printed) == ""
    assert printed[TRAINOPS_KEY]["DebugOutputPath"] == "s3://bucket/out/dbg/debug-output"
    assert printed["DebugRuleConfigurations"][0]["RuleConfigurationName"] == "LossNotDecreasing"
    assert printed[TRAINOPS_KEY]["DebugRuleEvaluationStatuses"][0]["Evaluation"]["Rule"]
    assert printed["InputDataConfig"][1]["DataSource"] == {
        "FileSystemDataSource": {
            "DirectoryPath": "/mnt/data",
            "FileSystemAccessMode": "ro",
            "FileSystemType": "EFS",
            "FileSystemId": "fs-0123456789",
        }
    }


def _key_paths(value: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key path of ``value``'s nested objects (not into lists: an item's keys are
    its list's member's to declare)."""
    if isinstance(value, dict):
        for key, below in value.items():
            yield f"{prefix}{key}"
            yield from _key_paths(below, f"{prefix}{key}.")


def _undeclared(paths: Iterator[str], declared: set[str]) -> list[str]:
    """The paths that are neither declared, below a declared one, nor a section above one."""
    return [
        path
        for path in paths
        if not any(
            path == d or path.startswith(f"{d}.") or d.startswith(f"{path}.") for d in declared
        )
    ]


def test_every_rest_key_is_declared_and_every_member_s_is_shown(store: MetadataStore) -> None:
    """The REST describe's keys are the members' ``rest`` paths and ``VIEW_KEYS``, no other:
    a key added to a view by hand and not declared fails here."""
    job = _stored(store, _request())
    described = describe(store, job, Settings.load(), 200.0)
    declared = {m.rest for m in MEMBERS if m.rest} | set(VIEW_KEYS)
    assert _undeclared(_key_paths(described), declared) == []
    assert _undeclared(iter(["AlgorithmSpecification.Gpus", "Gpus"]), declared) == [
        "AlgorithmSpecification.Gpus",
        "Gpus",
    ]
    for member in MEMBERS:  # (each member's key is there: the first test of this module)
        assert member.rest_by is None or callable(getattr(_views, member.rest_by, None))
    assert set(VIEW_KEYS) <= set(described)  # no stale names


def test_a_new_member_is_shown_by_the_rest_describe_with_no_other_edit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extra = Member("instance_count", None, None, "Placement.Hosts", to_rest=lambda v, _: v * 10)
    monkeypatch.setattr(_schema, "MEMBERS", (*MEMBERS, extra))
    spec = JobSpec(entry_point="train.py", instance_count=3).view()
    shown = rest_sections(spec, Shown(Masker.for_job({}, {}), lambda: "s3://b/out"))
    assert shown["Placement"] == {"Hosts": 30}
    assert shown["ResourceConfig"] == {"InstanceType": "ml.m5.large", "InstanceCount": 3}


def test_a_section_the_job_has_not_got_is_null_and_a_limit_not_set_left_out() -> None:
    spec = JobSpec(entry_point="train.py").view()
    shown = rest_sections(spec, Shown(Masker.for_job({}, {}), lambda: "s3://b/out"))
    assert shown["CheckpointConfig"] is None
    assert "MaxWaitTimeInSeconds" not in shown["StoppingCondition"]
    assert "ContainerEntrypoint" not in shown["AlgorithmSpecification"]
    assert shown["OutputDataConfig"] == {"S3OutputPath": "s3://b/out", "CompressionType": "GZIP"}


def test_the_rest_describe_masks_what_it_derives() -> None:
    spec = JobSpec(
        entry_point="train.py",
        hyperparameters={"db_password": "hunter2-value", "lr": 0.1},
        environment={"API_TOKEN": "tok-secret-1"},
        checkpoint={"uri": "s3://user:pass-word@bucket/ckpt"},
    ).view()
    shown = rest_sections(
        spec, Shown(Masker.for_job(spec.environment, spec.hyperparameters), lambda: "")
    )
    text = str(shown)
    assert "hunter2-value" not in text and "tok-secret-1" not in text and "pass-word" not in text
    assert shown["HyperParameters"]["lr"] == "0.1"
