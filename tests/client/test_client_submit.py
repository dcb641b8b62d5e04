"""Submission: what gets packed, where it is uploaded, and what is posted to the server."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.client._scripted_api import Request, ScriptedAPI
from trainops import JobSpec, SpecError
from trainops._settings import Settings
from trainops.archive import pack
from trainops.client import Client, submit_job

API = "/api/v1"


def _server(api: ScriptedAPI, output_uri: str) -> None:
    api.routes[("GET", f"{API}/info")] = (200, {"default_output_uri": output_uri})

    def create(request: Request) -> tuple[int, Any]:
        return 201, {"TrainingJobName": request.body["job_name"], "TrainingJobStatus": "InProgress"}

    api.routes[("POST", f"{API}/jobs")] = create

    def name(request: Request) -> tuple[int, Any]:
        return 200, {"job_name": f"{request.body['base_job_name']}-2026-01-02-03-04-05-678"}

    api.routes[("POST", f"{API}/job-names")] = name


def _members(uri: str) -> list[str]:
    with tarfile.open(uri.removeprefix("file://")) as tar:
        return sorted(tar.getnames())


def _posted(api: ScriptedAPI) -> dict[str, Any]:
    body: dict[str, Any] = next(
        r.body for r in api.requests if (r.method, r.path) == ("POST", f"{API}/jobs")
    )
    return body


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home")


def test_without_source_dir_only_the_entry_point_is_packed(
    api: ScriptedAPI, settings: Settings, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    (work / "scripts").mkdir(parents=True)
    (work / "scripts" / "train.py").write_text("print('hi')\n")
    (work / "scripts" / "other.py").write_text("")
    (work / "notes.txt").write_text("")
    _server(api, settings.default_output_uri)
    spec = JobSpec(entry_point="scripts/train.py", base_job_name="demo")
    with Client(api.url) as client:
        name = submit_job(client, spec, settings, base_dir=work, progress=False)
    body = _posted(api)
    assert name.startswith("demo-") and body["job_name"] == name
    assert body["code_uri"] == f"{settings.default_output_uri}/{name}/source/sourcedir.tar.gz"
    assert _members(body["code_uri"]) == ["scripts/train.py"]
    assert body["spec"]["entry_point"] == "scripts/train.py"
    assert body["spec"]["source_dir"] is None


def test_a_trainops_home_inside_the_source_is_not_packed(api: ScriptedAPI, tmp_path: Path) -> None:
    # TRAINOPS_HOME=./.trainops with source_dir "." : the home holds every earlier job's
    # objects, its source archives among them, so packing it would make each submission carry
    # all the ones before it (and grow without end).
    work = tmp_path / "project"
    home = work / ".trainops"
    (home / "objects" / "jobs" / "old" / "source").mkdir(parents=True)
    (home / "objects" / "jobs" / "old" / "source" / "sourcedir.tar.gz").write_bytes(b"x" * 1000)
    (work / "train.py").write_text("print('hi')\n")
    settings = Settings(home=home)
    _server(api, settings.default_output_uri)
    spec = JobSpec(entry_point="train.py", source_dir=".", base_job_name="here")
    with Client(api.url) as client:
        submit_job(client, spec, settings, base_dir=work, progress=False)
        submit_job(client, spec, settings, base_dir=work, progress=False)
    codes = [
        r.body["code_uri"] for r in api.requests if (r.method, r.path) == ("POST", f"{API}/jobs")
    ]
    assert [_members(uri) for uri in codes] == [["train.py"], ["train.py"]]


def test_source_dir_is_packed_whole_and_paths_resolved(
    api: ScriptedAPI, settings: Settings, tmp_path: Path
) -> None:
    src = tmp_path / "work" / "src"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "train.py").write_text("")
    (src / "pkg" / "model.py").write_text("")
    (src / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"")
    (tmp_path / "work" / "data").mkdir()
    (tmp_path / "work" / "data" / "part-0").write_text("1\n")  # a channel must hold a file
    _server(api, settings.default_output_uri)
    spec = JobSpec(
        entry_point="train.py", source_dir="src", job_name="fixed-name",
        inputs={"train": {"uri": "data/"}}, checkpoint={"uri": "ckpt"},
    )  # fmt: skip
    with Client(api.url) as client:
        assert submit_job(client, spec, settings, base_dir=tmp_path / "work") == "fixed-name"
    body = _posted(api)
    assert _members(body["code_uri"]) == ["pkg/model.py", "train.py"]
    assert body["spec"]["source_dir"] == str(src)
    assert body["spec"]["inputs"]["train"]["uri"] == (tmp_path / "work" / "data").as_uri() + "/"
    assert body["spec"]["checkpoint"]["uri"] == (tmp_path / "work" / "ckpt").as_uri()


def test_output_path_decides_where_the_code_goes(
    api: ScriptedAPI, settings: Settings, tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text("")
    _server(api, "file:///never/used")
    out = (tmp_path / "out").as_uri()
    spec = JobSpec(entry_point="train.py", job_name="j1", output_path=out)
    with Client(api.url) as client:
        submit_job(client, spec, settings, base_dir=tmp_path)
    assert _posted(api)["code_uri"] == f"{out}/j1/source/sourcedir.tar.gz"
    # No /info and no name to ask for; only whether the explicit name is free (404 here).
    assert [(r.method, r.path) for r in api.requests] == [
        ("GET", f"{API}/jobs/j1"),
        ("POST", f"{API}/jobs"),
    ]


def test_source_dir_uri_is_used_as_the_code_archive(
    api: ScriptedAPI, settings: Settings, tmp_path: Path
) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("")
    archive = pack(tmp_path / "code", tmp_path / "ready" / "code.tar.gz")
    _server(api, settings.default_output_uri)
    spec = JobSpec(entry_point="train.py", source_dir=archive.as_uri(), job_name="j2")
    with Client(api.url) as client:
        submit_job(client, spec, settings, base_dir=tmp_path)
    assert _posted(api)["code_uri"] == archive.as_uri()


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("file:///nowhere/code.tar.gz", "no archive at"),
        ("s3://bucket/code/", "must name a .tar.gz"),
    ],
)
def test_bad_source_dir_uri_is_a_spec_error(
    api: ScriptedAPI, settings: Settings, tmp_path: Path, uri: str, reason: str
) -> None:
    _server(api, settings.default_output_uri)
    spec = JobSpec(entry_point="train.py", source_dir=uri, job_name="j3")
    with Client(api.url) as client, pytest.raises(SpecError, match=reason) as caught:
        submit_job(client, spec, settings, base_dir=tmp_path)
    assert caught.value.problems[0][0] == "source_dir"
    assert not any(r.method == "POST" for r in api.requests)


def test_missing_entry_point_fails_before_anything_is_sent(
    api: ScriptedAPI, settings: Settings, tmp_path: Path
) -> None:
    spec = JobSpec(entry_point="train.py")
    with Client(api.url) as client, pytest.raises(SpecError, match="entry_point"):
        submit_job(client, spec, settings, base_dir=tmp_path)
    assert api.requests == []


def test_the_servers_warnings_are_said_once_each_on_stderr_or_to_the_caller(
    api: ScriptedAPI, settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    note = "this machine allows no private namespaces (unshare: Operation not permitted; …)"
    _server(api, settings.default_output_uri)

    def create(request: Request) -> tuple[int, Any]:
        return 201, {"TrainingJobName": request.body["job_name"], "Warnings": [note]}

    api.routes[("POST", f"{API}/jobs")] = create
    (tmp_path / "train.py").write_text("print('hi')\n")
    spec = JobSpec(entry_point="train.py", base_job_name="demo")
    with Client(api.url) as client:
        submit_job(client, spec, settings, base_dir=tmp_path, progress=False)
        assert capsys.readouterr().err == f"warning: {note}\n"
        heard: list[str] = []
        submit_job(
            client, spec, settings, base_dir=tmp_path, progress=False, on_warning=heard.append
        )
    assert heard == [note] and capsys.readouterr().err == ""


def test_a_servers_warning_cannot_write_escapes_or_lines_to_the_terminal(
    api: ScriptedAPI, settings: Settings, tmp_path: Path
) -> None:
    _server(api, settings.default_output_uri)
    hostile = "ok\x1b]0;owned\x07\nsecond line\r" + "x" * 5000

    def create(request: Request) -> tuple[int, Any]:
        return 201, {"TrainingJobName": request.body["job_name"], "Warnings": [hostile]}

    api.routes[("POST", f"{API}/jobs")] = create
    (tmp_path / "train.py").write_text("print('hi')\n")
    heard: list[str] = []
    with Client(api.url) as client:
        spec = JobSpec(entry_point="train.py", base_job_name="demo")
        submit_job(
            client, spec, settings, base_dir=tmp_path, progress=False, on_warning=heard.append
        )
    [line] = heard
    assert line.startswith("ok?]0;owned??second line?x") and line.endswith("x…")
    assert len(line) == 1001 and line.isprintable()
