"""The packer's workers: a failing shard is one clear error, in-process or from a worker
process, and the shards finished before it are published with their markers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data._tree import make_tree
from trainops.data import PackError, ShardReader
from trainops.data._pack_dest import LocalDest
from trainops.data._pack_pool import run_pool
from trainops.data._pack_source import list_source
from trainops.data._pack_worker import ShardTask, pack_shards


def _tasks(src: Path, dest: Path, per_shard: int, broken: int | None) -> list[ShardTask]:
    source = list_source(str(src), None)
    tasks = []
    for number, start in enumerate(range(0, len(source.files), per_shard)):
        files = source.files[start : start + per_shard]
        if number == broken:  # a file listed with a size it does not have
            files = (files[0]._replace(size=1), *files[1:])
        tasks.append(ShardTask(str(dest), source.location, "shards", number, files, False))
    return tasks


def test_in_process_a_bad_shard_stops_the_batch_after_publishing_the_ones_before(
    tmp_path: Path,
) -> None:
    make_tree(tmp_path / "src", {"a": 40})
    dest = LocalDest(tmp_path / "out")
    tasks = _tasks(tmp_path / "src", tmp_path / "out", 10, broken=2)
    with pytest.raises(PackError, match=r"a/0020\.bin: changed while packing \(1 bytes listed\)"):
        pack_shards(tasks, dest, lambda files, size: None)
    for number in (0, 1):
        marker = json.loads((tmp_path / "out" / ".pack" / f"part-{number:05d}.json").read_text())
        with ShardReader.open(tmp_path / "out" / marker["name"], sha256=marker["sha256"]) as shard:
            assert len(shard) == 10
    assert not (tmp_path / "out" / "part-00002.tops").exists()
    assert not (tmp_path / "out" / "part-00003.tops").exists()
    assert list((tmp_path / "out" / ".pack").glob("tmp-*")) == []


def test_a_worker_process_error_reaches_the_parent_as_is(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 40})
    LocalDest(tmp_path / "out")
    tasks = _tasks(tmp_path / "src", tmp_path / "out", 5, broken=3)
    seen: list[int] = []
    with pytest.raises(PackError, match=r"a/0015\.bin: changed while packing"):
        run_pool(tasks, 2, lambda files, size: seen.append(files))
    assert (tmp_path / "out" / "part-00001.tops").exists()


def test_the_pool_returns_every_shard_by_number(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 30})
    LocalDest(tmp_path / "out")
    tasks = _tasks(tmp_path / "src", tmp_path / "out", 4, broken=None)
    counted: list[int] = []
    infos = run_pool(tasks, 3, lambda files, size: counted.append(files))
    assert sorted(infos) == list(range(len(tasks)))
    assert [infos[n].name for n in range(len(tasks))] == [
        f"part-{n:05d}.tops" for n in range(len(tasks))
    ]
    assert sum(counted) == 30


def test_a_script_without_a_main_guard_gets_a_clear_error(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 30})
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from trainops.data import PackOptions, pack\n"
        f"pack({str(tmp_path / 'src')!r}, {str(tmp_path / 'out')!r}, "
        "PackOptions(shard_size=10_000, workers=2))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "trainops.data._errors.PackError: a pack worker process died" in done.stderr
    assert "if __name__ == '__main__':" in done.stderr
