"""Merging multi-host parts: host order, algo-1 wins clashes, and a merge done again is harmless."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from trainops._settings import Settings
from trainops.control import merge_parts


def _part(folder: Path, host: str, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / f"{host}.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _read(path: Path) -> dict[str, str]:
    with tarfile.open(path, "r:gz") as tar:
        return {
            m.name: (tar.extractfile(m) or io.BytesIO()).read().decode()
            for m in tar.getmembers()
            if m.isfile()
        }


def test_parts_merge_in_host_order_and_are_deleted(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    prefix = tmp_path / "out" / "job"
    parts = prefix / "output" / "model-parts"
    _part(parts, "algo-10", {"same.txt": "ten", "ten.txt": "10"})
    _part(parts, "algo-2", {"same.txt": "two", "./two.txt": "2"})
    _part(parts, "algo-1", {"same.txt": "one"})
    merged = merge_parts(settings, prefix.as_uri(), 3)
    final = prefix / "output" / "model.tar.gz"
    assert merged == {"model": final.as_uri()}
    assert _read(final) == {"same.txt": "one", "./two.txt": "2", "ten.txt": "10"}
    assert list(parts.iterdir()) == []


def test_a_merge_done_again_keeps_the_first_result(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    prefix = tmp_path / "out" / "job"
    parts = prefix / "output" / "output-parts"
    _part(parts, "algo-1", {"a.txt": "a"})
    _part(parts, "algo-2", {"b.txt": "b"})
    first = merge_parts(settings, prefix.as_uri(), 2)
    # A crash while the parts were being deleted leaves some of them behind.
    _part(parts, "algo-2", {"b.txt": "changed"})
    again = merge_parts(settings, prefix.as_uri(), 2)
    assert first == again == {"output": (prefix / "output" / "output.tar.gz").as_uri()}
    assert _read(prefix / "output" / "output.tar.gz") == {"a.txt": "a", "b.txt": "b"}
    assert list(parts.iterdir()) == []
    assert merge_parts(settings, (tmp_path / "nothing").as_uri(), 2) == {}
