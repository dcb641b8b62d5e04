"""A job's artifacts and checkpoints on its page: the model and output archives downloadable
through ``/ui/jobs/{job}/artifacts/{artifact}`` (the recorded object only, streamed, as an
attachment the browser will not render; hostile names and records refused), and its checkpoint
records with their sync state (``GET /api/v1/jobs/{name}/checkpoints``)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.control._harness import ControlPlane
from trainops.server.ui._artifacts import CHUNK
from trainops.store import CheckpointRecord


def _finished(plane: ControlPlane, name: str) -> dict[str, str]:
    """A finished job with a model and an output archive where the merge puts them
    (``<output prefix>/output/``), recorded as the merge records them (the fake agents upload
    none)."""
    plane.submit(name, {"FAKE_LINES": "1"})
    plane.wait_ended(name)
    prefix = plane.server.controller.job(name).output_prefix
    uris = {}
    for artifact in ("model", "output"):
        uri = f"{prefix}/output/{artifact}.tar.gz"
        Path(uri.removeprefix("file://")).parent.mkdir(parents=True, exist_ok=True)
        Path(uri.removeprefix("file://")).write_bytes(f"{artifact} of {name}".encode())
        plane.server.controller.store.add_artifact(name, artifact, uri)
        uris[artifact] = uri
    return uris


def test_the_model_and_output_download_as_attachments(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    uris = _finished(plane, "arch")
    page = browser_session.get("/ui/jobs/arch").text
    for artifact in ("model", "output"):
        assert f'href="/ui/jobs/arch/artifacts/{artifact}" download>' in page
        answer = browser_session.get(f"/ui/jobs/arch/artifacts/{artifact}")
        assert answer.status_code == 200, answer.text
        assert answer.content == Path(uris[artifact].removeprefix("file://")).read_bytes()
        assert answer.headers["content-type"] == "application/octet-stream"
        assert answer.headers["content-disposition"] == (
            f'attachment; filename="{uris[artifact].rsplit("/", 1)[-1]}"'
        )
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["content-security-policy"].startswith("default-src 'none'")


def test_a_large_artifact_streams_whole(plane: ControlPlane, browser_session: httpx.Client) -> None:
    uri = _finished(plane, "big")["model"]
    data = os.urandom(2 * CHUNK + 12345)  # three chunks, the last one short
    Path(uri.removeprefix("file://")).write_bytes(data)
    with browser_session.stream("GET", "/ui/jobs/big/artifacts/model") as answer:
        assert answer.status_code == 200
        assert answer.read() == data


@pytest.mark.parametrize(
    "path",
    [
        "/ui/jobs/hostile/artifacts/profiler_report",  # not a downloadable artifact
        "/ui/jobs/hostile/artifacts/..%2F..%2Fetc%2Fpasswd",
        "/ui/jobs/hostile/artifacts/%2Fetc%2Fpasswd",
        "/ui/jobs/hostile/artifacts/model%00",
        "/ui/jobs/%2E%2E/artifacts/model",
        "/ui/jobs/%3Cb%3Enope/artifacts/model",  # no such job
        "/ui/jobs/hostile/artifacts/moved",  # its record points outside its output
        "/ui/jobs/hostile/artifacts/output",  # its object is gone
    ],
)
def test_hostile_and_missing_artifacts_are_refused(
    plane: ControlPlane, browser_session: httpx.Client, tmp_path: Path, path: str
) -> None:
    uris = _finished(plane, "hostile")
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    store = plane.server.controller.store
    store.add_artifact("hostile", "moved", f"file://{secret}")
    store.delete_artifacts("hostile", ["model"])
    store.add_artifact("hostile", "model", f"file://{secret}")  # as if a record were forged
    Path(uris["output"].removeprefix("file://")).unlink()
    answer = browser_session.get(path)
    assert answer.status_code in (404, 400), answer.text
    assert "not yours" not in answer.text and "<b>nope" not in answer.text
    forged = browser_session.get("/ui/jobs/hostile/artifacts/model")
    assert forged.status_code == 404 and "not under its output" in forged.text
    assert "not yours" not in forged.text


def test_without_a_session_nothing_is_downloaded(plane: ControlPlane) -> None:
    _finished(plane, "private")
    plane.server.ui_link()  # the server has a token: a browser without a session has nothing
    with httpx.Client(base_url=plane.server.url, timeout=60) as stranger:
        answer = stranger.get("/ui/jobs/private/artifacts/model")
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"


def test_checkpoints_show_each_sync_state_as_text(
    plane: ControlPlane, browser_session: httpx.Client
) -> None:
    plane.submit("ckpt", {"FAKE_LINES": "1"}, checkpoint={"uri": "file:///tmp/ck"})
    plane.wait_ended("ckpt")
    store = plane.server.controller.store
    store.add_checkpoint(CheckpointRecord("ckpt", 1, "algo-1", "synced", 1.7e9, 3, 4096,
                                          upload_seconds=0.25))  # fmt: skip
    store.add_checkpoint(CheckpointRecord("ckpt", 1, "algo-1", "sync_failed", 1.7e9 + 60, 1, 10,
                                          reason="<script>alert(1)</script> upload stalled"))  # fmt: skip
    listed = plane.client.get("/api/v1/jobs/ckpt/checkpoints").json()
    assert [c["Kind"] for c in listed["Checkpoints"]] == ["synced", "sync_failed"]
    assert (
        listed["Checkpoints"][0]["Host"] == "algo-1" and listed["Checkpoints"][0]["Bytes"] == 4096
    )
    answer = browser_session.get("/ui/jobs/ckpt")
    assert answer.status_code == 200, answer.text[-600:]
    page = answer.text
    section = page[page.index("<h2>Checkpoints</h2>") : page.index("<h2>Cost</h2>")]
    assert "file:///tmp/ck" in section and "<td>synced</td>" in section
    assert "<td>sync_failed</td>" in section and "2023-11-14 22:14:20 UTC" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt; upload stalled" in section
    assert "<script>alert" not in page
    assert plane.client.get("/api/v1/jobs/nope/checkpoints").status_code == 404
