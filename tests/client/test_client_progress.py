"""Byte progress: the store reports bytes as it uploads, the bar shows only when it is due."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops._settings import Settings
from trainops.client import TransferBar
from trainops.storage import store_for


def test_file_upload_reports_every_byte(tmp_path: Path) -> None:
    src = tmp_path / "big.bin"
    data = bytes(range(256)) * 12_000  # a few chunks of the store's copy loop
    src.write_bytes(data)
    uri = (tmp_path / "store" / "big.bin").as_uri()
    deltas: list[int] = []
    store_for(uri, Settings(home=tmp_path)).upload(src, uri, on_bytes=deltas.append)
    assert sum(deltas) == len(data) and len(deltas) > 1
    assert (tmp_path / "store" / "big.bin").read_bytes() == data


def test_upload_without_callback_still_works(tmp_path: Path) -> None:
    src = tmp_path / "a.txt"
    src.write_text("x")
    uri = (tmp_path / "store" / "a.txt").as_uri()
    store_for(uri, Settings(home=tmp_path)).upload(src, uri)
    assert (tmp_path / "store" / "a.txt").read_text() == "x"


def test_bar_appears_once_due_and_counts_all_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    with TransferBar(300, "uploading source", show_after=0) as bar:
        bar(100)
        assert bar.shown
        bar(200)
        assert bar.done == 300
    assert not bar.shown
    assert "uploading source" in capsys.readouterr().err


def test_bar_stays_hidden_for_a_quick_transfer(capsys: pytest.CaptureFixture[str]) -> None:
    with TransferBar(300, "uploading source", show_after=3600) as bar:
        bar(300)
        assert not bar.shown
    assert capsys.readouterr().err == ""


def test_disabled_bar_never_shows(capsys: pytest.CaptureFixture[str]) -> None:
    with TransferBar(300, "x", enabled=False, show_after=0) as bar:
        bar(300)
        assert not bar.shown
    assert capsys.readouterr().err == ""


@pytest.mark.s3
@pytest.mark.slow
def test_s3_upload_reports_bytes(tmp_path: Path, s3_settings: Settings, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/code/sourcedir.tar.gz"
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 300_000)
    deltas: list[int] = []
    store = store_for(uri, s3_settings)
    store.upload(src, uri, on_bytes=deltas.append)
    assert sum(deltas) == 300_000
    assert store.get_bytes(uri) == src.read_bytes()
