"""A FileSystemDataSource channel through the API: refused without its FileSystemId in the
service's words (the model requires all four members), mapped to the spec's file-system channel
with it and given back as sent; a file system the API cannot name (a local path, no id) is
left out of the answer's DataSource, which stays valid by the model, and shown as trainops'."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.aws.test_conformance import SAMPLES
from tests.server.aws.test_schema import describe_errors
from trainops._errors import SpecError
from trainops._settings import Settings
from trainops.server._schema import TRAINOPS_KEY
from trainops.server.aws import AwsError, service_model, validate
from trainops.server.aws._create import hyperparameters, spec_of
from trainops.server.aws._sagemaker import api_describe, cli_describe
from trainops.server.aws._shapes import to_wire
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore

EFS = {
    "FileSystemId": "fs-0123abcd",
    "FileSystemAccessMode": "ro",
    "FileSystemType": "EFS",
    "DirectoryPath": "/mnt/efs/train",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MetadataStore]:
    opened = MetadataStore(tmp_path / "trainops.db")
    yield opened
    opened.close()


def _request(source: dict[str, Any], mode: str | None = None) -> dict[str, Any]:
    request: dict[str, Any] = copy.deepcopy(SAMPLES["CreateTrainingJob"])
    channel: dict[str, Any] = {
        "ChannelName": "shared",
        "DataSource": {"FileSystemDataSource": source},
    }
    request["InputDataConfig"] = [channel | ({"InputMode": mode} if mode else {})]
    return request


def _created(store: MetadataStore, spec: JobSpec, name: str = "fs-job") -> JobRecord:
    return store.create_job(
        name=name,
        spec=spec.view(),
        code_uri="s3://bucket/code.tar.gz",
        output_prefix=f"s3://bucket/out/{name}",
        max_attempts=1,
        status="InProgress",
        secondary_status="Starting",
        message="starting",
        now=100.0,
    )


def test_without_its_file_system_id_it_is_refused_in_the_service_s_words() -> None:
    request = _request({k: v for k, v in EFS.items() if k != "FileSystemId"})
    shape = service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    with pytest.raises(AwsError) as refused:
        validate(request, shape)
    assert refused.value.code == "ValidationException"
    assert refused.value.message == (
        "1 validation error detected: Value null at "
        "'inputDataConfig.1.member.dataSource.fileSystemDataSource.fileSystemId' failed to "
        "satisfy constraint: Member must not be null"
    )


def test_with_it_the_channel_is_the_spec_s_file_system_and_comes_back_as_sent(
    store: MetadataStore,
) -> None:
    request = _request(EFS)
    validate(request, service_model("sagemaker").operation_model("CreateTrainingJob").input_shape)
    spec = JobSpec(**spec_of(request, hyperparameters(request)))
    fs = spec.inputs["shared"].file_system
    assert fs is not None and spec.inputs["shared"].uri is None
    assert (fs.directory_path, fs.access_mode, fs.type, fs.id) == (
        "/mnt/efs/train",
        "ro",
        "EFS",
        "fs-0123abcd",
    )
    job = _created(store, spec)
    output = service_model("sagemaker").operation_model("DescribeTrainingJob").output_shape
    answer = to_wire(api_describe(store, job, Settings.load(), 200.0), output)
    assert answer["InputDataConfig"][0]["DataSource"] == {"FileSystemDataSource": EFS}
    assert answer["InputDataConfig"][0]["InputMode"] == "File"
    assert describe_errors(cli_describe(store, job, Settings.load(), 200.0)) == ""


def test_a_file_system_channel_is_file_mode_only() -> None:
    request = _request(EFS, mode="Pipe")
    with pytest.raises(SpecError, match="a file_system channel is File mode only"):
        JobSpec(**spec_of(request, hyperparameters(request)))


def test_a_file_system_the_api_cannot_name_leaves_the_answer_valid(store: MetadataStore) -> None:
    spec = JobSpec(
        entry_point="train.py",
        inputs={"shared": {"file_system": {"directory_path": "/srv/data", "type": "NFS"}}},
    )
    job = _created(store, spec)
    printed = cli_describe(store, job, Settings.load(), 200.0)
    assert describe_errors(printed) == ""
    assert printed["InputDataConfig"][0]["DataSource"] == {}
    assert printed[TRAINOPS_KEY]["InputDataConfig"][0]["FileSystem"] == {
        "DirectoryPath": "/srv/data",
        "FileSystemAccessMode": "ro",
        "FileSystemType": "NFS",
    }
