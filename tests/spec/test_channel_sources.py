"""Local channel sources are checked at submission: what a download would find missing or empty
is refused with the field, the channel and the path, and nothing else is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainops import SpecError
from trainops._settings import Settings
from trainops.spec import JobSpec, check_channel_sources, load_raw_spec, resolve_paths
from trainops.storage import store_for


def _raw(tmp_path: Path, inputs: str) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.yaml"
    path.write_text(f"entry_point: train.py\ninputs:\n{inputs}")
    return path


def _problems(tmp_path: Path, inputs: str) -> list[tuple[str, str]]:
    raw = load_raw_spec(_raw(tmp_path, inputs))
    with pytest.raises(SpecError) as caught:
        raw.check_sources()
    return caught.value.problems


def test_a_missing_folder_names_field_line_channel_and_path(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "  train:\n    uri: data/trian/\n")
    assert problems == [
        ("inputs.train.uri (line 4)", f"channel 'train': {tmp_path}/data/trian/ does not exist")
    ]


def test_every_shape_of_inputs_is_checked(tmp_path: Path) -> None:
    assert _problems(tmp_path, "  test: missing/\n")[0][0] == "inputs.test (line 3)"
    (tmp_path / "job.yaml").write_text("entry_point: train.py\ninputs: nowhere/\n")
    with pytest.raises(SpecError, match=r"channel 'training': .*nowhere/ does not exist"):
        load_raw_spec(tmp_path / "job.yaml").check_sources()


def test_a_folder_without_a_file_is_refused_as_a_download_would_find_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / ".x.part").write_text("an upload in flight")  # not an object yet
    outside = tmp_path / "outside.npz"
    outside.write_text("x")
    (data / "sub" / "link.npz").symlink_to(outside)  # a link is not an object
    problems = _problems(tmp_path, "  train: data/\n")
    assert problems[0][1] == f"channel 'train': {data}/ holds no files to download"
    assert (
        store_for(data.as_uri(), Settings(home=tmp_path / "home")).list_objects(data.as_uri()) == []
    )  # the file store agrees: nothing to download


def test_a_file_or_a_folder_with_a_file_deep_down_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "data" / "a" / "b").mkdir(parents=True)
    (tmp_path / "data" / "a" / "b" / "part-0").write_text("1\n")
    (tmp_path / "one.csv").write_text("1\n")
    raw = load_raw_spec(
        _raw(tmp_path, f"  train: data/\n  one: one.csv\n  abs: file://{tmp_path}/data\n")
    )
    raw.check_sources()  # raises nothing


def test_a_device_or_a_fifo_is_not_a_source(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    problems = _problems(tmp_path, "  a: fifo\n  b: file:///dev/null\n")
    assert problems == [
        ("inputs.a (line 3)", f"channel 'a': {tmp_path}/fifo is neither a file nor a folder"),
        ("inputs.b (line 4)", "channel 'b': /dev/null is neither a file nor a folder"),
    ]


def test_a_manifest_must_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x").write_text("1")
    problems = _problems(
        tmp_path, "  train: {uri: data, s3_data_type: manifest_file}\n  test: {uri: m.json, s3_data_type: ManifestFile}\n"
    )  # fmt: skip
    assert problems[0][1] == (
        f"channel 'train': {tmp_path}/data is a folder; a manifest channel's uri names a file"
    )
    assert problems[1][1] == f"channel 'test': manifest {tmp_path}/m.json does not exist"


def test_s3_and_file_system_channels_are_left_to_the_hosts(tmp_path: Path) -> None:
    raw = load_raw_spec(
        _raw(
            tmp_path,
            "  a: s3://bucket/nothing/here/\n"
            "  b: {file_system: {directory_path: /no/such/mount}}\n",
        )
    )
    raw.check_sources()


def test_a_folder_with_a_space_resolves_to_a_uri_the_file_store_reads(tmp_path: Path) -> None:
    data = tmp_path / "my data"
    data.mkdir()
    (data / "part-0").write_text("1\n")
    raw = load_raw_spec(_raw(tmp_path, "  train: my data/\n"))
    raw.check_sources()
    uri = raw.data["inputs"]["train"]
    assert uri == f"file://{data}/"
    listed = store_for(uri, Settings(home=tmp_path / "home")).list_objects(uri)
    assert [info.key for info in listed] == ["part-0"]


def test_a_validated_spec_is_checked_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    spec = resolve_paths(JobSpec(entry_point="train.py", inputs={"train": "gone/"}), tmp_path)
    with pytest.raises(SpecError) as caught:
        check_channel_sources(spec)
    assert caught.value.problems == [
        ("inputs.train.uri", f"channel 'train': {tmp_path}/gone/ does not exist")
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_a_folder_that_cannot_be_read_says_so(tmp_path: Path) -> None:
    locked = tmp_path / "data" / "locked"
    locked.mkdir(parents=True)
    (locked / "part-0").write_text("1\n")
    locked.chmod(0)
    try:
        problems = _problems(tmp_path, "  train: data/\n")
    finally:
        locked.chmod(0o700)
    assert "cannot read" in problems[0][1] and "Permission denied" in problems[0][1]


@pytest.mark.parametrize(
    "uri",
    ["file://", "file:///", "file:///dev/null/x", f"file:///{'a' * 5000}", "s3://b/../../etc"],
)
def test_hostile_sources_are_refused_or_left_alone_without_a_traceback(
    tmp_path: Path, uri: str
) -> None:
    raw = load_raw_spec(_raw(tmp_path, f"  train: '{uri}'\n"))
    try:
        raw.check_sources()
    except SpecError as exc:
        assert exc.problems[0][0].startswith("inputs.train")
