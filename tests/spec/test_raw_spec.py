"""A spec read as plain data: paths resolved like load_spec does, and what the client relies on
checked for shape, so that everything else can be left to the server's validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops import SpecError
from trainops.spec import base_job_name, load_raw_spec, load_spec


def _spec(tmp_path: Path, text: str, *, code: bool = True) -> Path:
    if code:
        (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_paths_resolve_as_load_spec_resolves_them(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    path = _spec(
        tmp_path,
        "entry_point: train.py\nsource_dir: src\noutput_path: out/\n"
        "checkpoint: {uri: ckpt}\ninputs: {train: data/, test: {uri: s3://b/t/}}\n",
        code=False,
    )
    raw = load_raw_spec(path)
    model = load_spec(path)
    assert raw.sendable
    assert raw.data["source_dir"] == model.source_dir == str(tmp_path / "src")
    assert raw.data["output_path"] == model.output_path
    assert raw.data["checkpoint"]["uri"] == model.checkpoint.uri  # type: ignore[union-attr]
    assert raw.data["inputs"]["train"] == model.inputs["train"].uri
    assert raw.data["inputs"]["test"]["uri"] == model.inputs["test"].uri == "s3://b/t/"


def test_a_single_input_uri_is_resolved_too(tmp_path: Path) -> None:
    raw = load_raw_spec(_spec(tmp_path, "entry_point: train.py\ninputs: data/\n"))
    assert raw.data["inputs"] == (tmp_path / "data").as_uri() + "/"


@pytest.mark.parametrize(
    "text",
    [
        "entry_point: /abs/train.py\n",
        "entry_point: ../train.py\n",
        "entry_point: [train.py]\n",
        "entry_point: train.py\nsource_dir: 3\n",
        "entry_point: train.py\njob_name: not_a_name\n",
        "entry_point: train.py\noutput_path: ftp://host/x\n",
        "entry_point: train.py\nhyperparameters: {when: 2024-01-01}\n",
        "entry_point: train.py\nhyperparameters: {1: one}\n",
        "entry_point: train.py\nhyperparameters: {a: .nan}\n",
    ],
)
def test_what_the_client_relies_on_is_validated_locally(tmp_path: Path, text: str) -> None:
    raw = load_raw_spec(_spec(tmp_path, text))
    assert not raw.sendable
    with pytest.raises(SpecError, match=r"\(line \d+\)"):
        raw.validate()


def test_invalid_fields_come_before_missing_code(tmp_path: Path) -> None:
    raw = load_raw_spec(_spec(tmp_path, "entry_point: train.py\nmetrics: 60\n", code=False))
    assert not raw.sendable
    with pytest.raises(SpecError) as caught:
        raw.validate()
    assert caught.value.problems[0][0] == "metrics (line 2)"
    (tmp_path / "job.yaml").write_text("entry_point: train.py\n")
    with pytest.raises(SpecError, match="not found") as missing:
        load_raw_spec(tmp_path / "job.yaml").validate()
    assert missing.value.problems[0][0] == "entry_point"


def test_server_problems_get_the_lines_of_the_file(tmp_path: Path) -> None:
    raw = load_raw_spec(_spec(tmp_path, "entry_point: train.py\ninputs:\n  a:\n    uri: x\n"))
    error = raw.error([("inputs.a.uri", "bad"), ("nowhere", "also bad")])
    assert error.problems == [("inputs.a.uri (line 4)", "bad"), ("nowhere", "also bad")]
    assert error.source == str(tmp_path / "job.yaml")


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("entry_point: train.py\nbase_job_name: mine\n", "mine"),
        ("entry_point: scripts/my_train.py\n", "my-train"),
        ("entry_point: train.py\nbase_job_name: not_valid\n", "train"),
    ],
)
def test_the_name_base_comes_from_the_raw_fields(tmp_path: Path, text: str, base: str) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "my_train.py").write_text("")
    raw = load_raw_spec(_spec(tmp_path, text))
    assert raw.base_job_name == base
    if raw.sendable and "not_valid" not in text:
        assert base_job_name(load_spec(tmp_path / "job.yaml")) == base
