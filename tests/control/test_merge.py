"""Merging multi-host parts: host order, algo-1 wins clashes, and a merge done again is harmless."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from trainops._settings import Settings
from trainops.control import merge_parts
from trainops.control._merge import _plain_key


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


def _files_of(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()
    }


def _file_part(prefix: Path, host: str, files: dict[str, str], folder: str = "model-parts") -> None:
    for name, text in files.items():
        path = prefix / "output" / folder / host / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_uncompressed_parts_are_copied_in_host_order_over_what_an_earlier_attempt_left(
    tmp_path: Path,
) -> None:
    settings = Settings(home=tmp_path / "home")
    prefix = tmp_path / "out" / "job"
    _file_part(prefix, "algo-10", {"same.txt": "ten", "deep/ten.txt": "10"})
    _file_part(prefix, "algo-2", {"same.txt": "two", "two.txt": "2"})
    _file_part(prefix, "algo-1", {"same.txt": "one"})
    _file_part(prefix, "algo-1", {"one.txt": "1"}, folder="data-parts")
    (prefix / "output" / "model").mkdir(parents=True)
    (prefix / "output" / "model" / "stale.txt").write_text("an earlier attempt's")
    merged = merge_parts(settings, prefix.as_uri(), 3, compressed=False)
    final = prefix / "output"
    assert merged == {
        "model": (final / "model").as_uri() + "/",
        "output": (final / "data").as_uri() + "/",
    }
    assert _files_of(final / "model") == {"same.txt": "one", "two.txt": "2", "deep/ten.txt": "10"}
    assert _files_of(final / "data") == {"one.txt": "1"}
    assert _files_of(final / "model-parts") == {} and _files_of(final / "data-parts") == {}


def test_an_uncompressed_merge_cut_short_is_done_again_with_the_winners_kept(
    tmp_path: Path,
) -> None:
    settings = Settings(home=tmp_path / "home")
    prefix = tmp_path / "out" / "job"
    _file_part(prefix, "algo-1", {"same.txt": "one"})
    _file_part(prefix, "algo-2", {"same.txt": "two", "two.txt": "2"})
    merge_parts(settings, prefix.as_uri(), 2, compressed=False)
    # As if the first merge had stopped after copying and deleting algo-2's part only (parts
    # go last host first): algo-1's part is still there, and so is what algo-2 gave.
    _file_part(prefix, "algo-1", {"same.txt": "one"})
    merged = merge_parts(settings, prefix.as_uri(), 2, compressed=False)
    final = prefix / "output" / "model"
    assert merged["model"] == final.as_uri() + "/"
    assert _files_of(final) == {"same.txt": "one", "two.txt": "2"}


def test_a_part_key_that_would_reach_out_of_the_merged_folder_is_not_copied(
    tmp_path: Path,
) -> None:
    settings = Settings(home=tmp_path / "home")
    prefix = tmp_path / "out" / "job"
    _file_part(prefix, "algo-1", {"fine.txt": "ok"})
    _file_part(prefix, "algo-2", {"fine.txt": "two"})
    # What a file store's listing cannot show but an S3 key can hold: checked on the keys.
    assert _plain_key("fine.txt") and _plain_key("a/b.txt")
    assert not any(_plain_key(k) for k in ("../x", "a/../../x", "./x", "a//b", "", "a/"))
    merge_parts(settings, prefix.as_uri(), 2, compressed=False)
    assert _files_of(prefix / "output" / "model") == {"fine.txt": "ok"}
    assert _files_of(tmp_path / "out") == {"job/output/model/fine.txt": "ok"}
