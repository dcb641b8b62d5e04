"""Job spec validation: every rejection names the field and the reason."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from trainops import Channel, JobSpec, SpecError
from trainops.spec import Distribution, load_spec, make_job_name, parse_spec


def problems(**fields: object) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        JobSpec(**{"entry_point": "train.py", **fields})
    return info.value.problems


def test_minimal_spec_has_sagemaker_defaults() -> None:
    spec = JobSpec(entry_point="train.py")
    assert spec.instance_type == "ml.m5.large"
    assert spec.instance_count == 1
    assert spec.stopping_condition.max_runtime_in_seconds == 86400
    assert spec.stopping_condition.grace_period_in_seconds == 120
    assert spec.retry_strategy.maximum_retry_attempts == 0
    assert spec.instance.vcpus == 2


def test_unknown_instance_type_suggests_close_names() -> None:
    [(path, reason)] = problems(instance_type="ml.c5.xlarg")
    assert path == "instance_type"
    assert "unknown instance type 'ml.c5.xlarg'" in reason
    assert "ml.c5.xlarge" in reason


@pytest.mark.parametrize("name", ["bad name", "a/b", "x" * 65, "", ".", "..", "../x", "a\\b"])
def test_channel_names_are_checked(name: str) -> None:
    [(path, reason)] = problems(inputs={name: {"uri": "s3://bucket/x/"}})
    assert path == "inputs"
    assert "[A-Za-z0-9._-]+" in reason and "not be '.' or '..'" in reason


@pytest.mark.parametrize("name", ["train", "a.b", "...", ".hidden", "x-y_z", "x" * 64])
def test_good_channel_names(name: str) -> None:
    assert list(JobSpec(entry_point="t.py", inputs={name: "s3://b/x/"}).inputs) == [name]


def test_bad_regex_and_missing_group() -> None:
    [(path, reason)] = problems(metric_definitions=[{"name": "loss", "regex": "loss=("}])
    assert path == "metric_definitions.0.regex"
    assert "not a valid regular expression" in reason
    [(path, reason)] = problems(metric_definitions=[{"name": "loss", "regex": "loss=[0-9]+"}])
    assert "capture group" in reason


def test_duplicate_metric_names() -> None:
    defs = [{"name": "loss", "regex": "a=(.*)"}, {"name": "loss", "regex": "b=(.*)"}]
    [(_, reason)] = problems(metric_definitions=defs)
    assert "repeated: loss" in reason


def test_too_many_hyperparameters_and_reserved_names() -> None:
    [(path, reason)] = problems(hyperparameters={f"h{i}": i for i in range(101)})
    assert path == "hyperparameters" and "at most 100" in reason
    [(_, reason)] = problems(hyperparameters={"sagemaker_program": "x.py"})
    assert "reserved" in reason
    [(_, reason)] = problems(hyperparameters={"big": "x" * 2501})
    assert "at most 2500" in reason


def test_unknown_nested_field_suggests_the_right_one() -> None:
    [(path, reason)] = problems(inputs={"train": {"uri": "s3://b/", "distrbution": "x"}})
    assert path == "inputs.train.distrbution"
    assert "did you mean 'distribution'" in reason


def test_distribution_aliases_and_errors() -> None:
    assert (
        Channel("s3://b/x", distribution="ShardedByS3Key").distribution
        is Distribution.SHARDED_BY_KEY
    )
    assert Channel("s3://b/x", distribution="sharded").distribution is Distribution.SHARDED_BY_KEY
    with pytest.raises(SpecError, match="use FullyReplicated or ShardedByKey"):
        Channel("s3://b/x", distribution="everywhere")


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"mode": "Stream"}, "not a input mode; use File, Pipe, FastFile"),
        ({"compression": "Gzip"}, "Gzip is for Pipe mode only"),
        ({"compression": "bz2", "mode": "Pipe"}, "not a compression; use None, Gzip"),
        ({"record_wrapping": "RecordIO", "mode": "FastFile"}, "RecordIO is for Pipe mode only"),
        ({"s3_data_type": "AugmentedManifestFile", "mode": "Pipe"}, "needs attribute_names"),
        (
            {"s3_data_type": "AugmentedManifestFile", "attribute_names": ["a"]},
            "AugmentedManifestFile is for Pipe mode only",
        ),
        ({"attribute_names": ["a"], "mode": "Pipe"}, "apply to s3_data_type Augmented"),
        ({"file_system": {"directory_path": "/d"}}, "exactly one"),
        ({"attribute_names": ["a", "a"]}, "must be unique"),
    ],
)
def test_channel_options_that_do_not_fit_are_refused(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SpecError, match=re.escape(fragment)):
        JobSpec(entry_point="t.py", inputs={"train": {"uri": "s3://b/x", **fields}})


def test_channel_modes_and_options_in_the_sdk_spellings() -> None:
    spec = JobSpec(
        entry_point="t.py",
        inputs={
            "a": {"uri": "s3://b/x", "mode": "pipe", "compression": "gzip"},
            "b": {"uri": "s3://b/y", "mode": "fast_file", "s3_data_type": "manifest_file"},
            "c": {
                "uri": "s3://b/m.jsonl",
                "mode": "Pipe",
                "s3_data_type": "AugmentedManifestFile",
                "attribute_names": ["source-ref", "label"],
                "record_wrapping": "recordio",
            },
        },
    )
    a, b, c = spec.view().inputs
    assert (a.mode, a.compression) == ("Pipe", "Gzip")
    assert (b.mode, b.s3_data_type) == ("FastFile", "ManifestFile")
    assert (c.record_wrapping, c.attribute_names) == ("RecordIO", ("source-ref", "label"))


def test_a_file_system_channel() -> None:
    channel = (
        JobSpec(
            entry_point="t.py",
            inputs={
                "fs": {"file_system": {"directory_path": "/mnt/fsx/data", "type": "fsxlustre"}}
            },
        )
        .view()
        .inputs[0]
    )
    assert channel.uri is None and channel.file_system is not None
    assert (channel.file_system.directory_path, channel.file_system.type) == (
        "/mnt/fsx/data",
        "FSxLustre",
    )
    assert not channel.file_system.writable
    for wrong, fragment in [
        ({"mode": "Pipe"}, "File mode only"),
        ({"distribution": "ShardedByKey"}, "FullyReplicated"),
        ({"uri": "s3://b/x"}, "exactly one"),
    ]:
        with pytest.raises(SpecError, match=fragment):
            JobSpec(
                entry_point="t.py",
                inputs={"fs": {"file_system": {"directory_path": "/d"}, **wrong}},
            )
    with pytest.raises(SpecError, match="access mode; use ro or rw"):
        Channel(file_system={"directory_path": "/d", "access_mode": "write"})
    with pytest.raises(SpecError, match="'data/train' is not absolute: name the directory"):
        Channel(file_system={"directory_path": "data/train"})


@pytest.mark.parametrize(
    ("uri", "fragment"),
    [("gs://b/x", "not supported"), ("s3:///x", "needs a bucket"), (" ", "empty")],
)
def test_uris_are_checked(uri: str, fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment):
        Channel(uri)


def test_checkpoint_local_path_must_stay_under_opt_ml() -> None:
    [(path, reason)] = problems(checkpoint={"uri": "s3://b/ck", "local_path": "/tmp/ck"})
    assert path == "checkpoint.local_path" and "/opt/ml/" in reason


def test_stopping_condition_limits() -> None:
    [(path, _)] = problems(stopping_condition={"max_runtime_in_seconds": 0})
    assert path == "stopping_condition.max_runtime_in_seconds"


def test_environment_names() -> None:
    [(_, reason)] = problems(environment={"1BAD": "x"})
    assert "not a valid environment variable name" in reason
    [(_, reason)] = problems(environment={"TRAINOPS_X": "x"})
    assert "reserved" in reason


def test_yaml_errors_carry_line_numbers(tmp_path: Path) -> None:
    text = "entry_point: train.py\ninputs:\n  train:\n    uri: s3://b/\n    distribution: nope\n"
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="job.yaml")
    assert info.value.problems[0][0] == "inputs.train.distribution (line 5)"
    assert "in job.yaml" in str(info.value)


def test_yaml_syntax_error_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="line 3, column 1: not valid YAML"):
        parse_spec("entry_point: [\n  x: y\n")


def test_load_spec_resolves_local_paths(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yaml").write_text(
        "entry_point: train.py\nsource_dir: src\ninputs:\n  train:\n    uri: data/\n"
        "checkpoint:\n  uri: ck/\noutput_path: out\n"
    )
    spec = load_spec(tmp_path / "job.yaml")
    assert spec.source_dir == str((tmp_path / "src").resolve())
    assert spec.inputs["train"].uri == (tmp_path / "data").resolve().as_uri() + "/"
    assert spec.checkpoint is not None and spec.checkpoint.uri.startswith("file://")
    assert spec.output_path == (tmp_path / "out").resolve().as_uri()


def test_load_spec_reports_missing_entry_point(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "job.yaml").write_text("entry_point: train.py\nsource_dir: src\n")
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "job.yaml")
    assert info.value.problems[0][0] == "entry_point"


def test_load_spec_missing_file() -> None:
    with pytest.raises(SpecError, match="cannot read file"):
        load_spec("/nonexistent/job.yaml")


def test_job_names() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    assert (
        make_job_name(JobSpec(entry_point="my_train.py"), now) == "my-train-2026-01-02-03-04-05-678"
    )
    assert make_job_name(JobSpec(entry_point="t.py", job_name="fixed"), now) == "fixed"
    long = make_job_name(JobSpec(entry_point="t.py", base_job_name="a" * 63), now)
    assert len(long) <= 63
