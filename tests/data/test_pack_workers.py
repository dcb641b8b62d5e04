"""The packer's workers: a failing shard is one clear error, in-process or from a worker
process, and the shards finished before it are published with their markers; tasks pickle
compactly and exactly, and processes claim each shard once."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data._tree import make_tree
from trainops.data import PackError, ShardReader
from trainops.data.packer._dest import LocalDest
from trainops.data.packer._formats import _lst_text
from trainops.data.packer._pool import run_pool
from trainops.data.packer._source import SourceFile, list_source
from trainops.data.packer._source_lst import format_lst_line
from trainops.data.packer._worker import ShardTask, claimed, pack_shards


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


def test_a_task_pickles_compactly_and_comes_back_exactly() -> None:
    shared = (1.0,)
    files = [SourceFile(n, shared, f"cat/{n:06d}.jpg", -1 if n % 7 else 4096) for n in range(1000)]
    files += [
        SourceFile(1000, (-0.0,), "neg/zero", 3),  # equal to 0.0, but not the same label
        SourceFile(1001, (0.0,), "pos/zero", 3),
        SourceFile(2**64 - 1, (2.5, -1.0, 1e-45), "many/labels", 0),
        SourceFile(1002, (), "no/labels", 1),
    ]
    task = ShardTask("out", "s3://bucket/src", "recordio", 3, tuple(files), True)
    raw = pickle.dumps(task, pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(raw)
    assert back == task
    assert [repr(f.labels) for f in back.files] == [repr(f.labels) for f in files]
    assert back.files[0].labels is back.files[999].labels  # shared tuples stay shared
    assert len(raw) < 40 * len(files)  # one tuple per file would be about twice that
    # A store key may hold a NUL: the paths then travel as a tuple.
    odd = ShardTask("out", "s3://b/src", "shards", 0, (SourceFile(0, (0.0,), "a\0b", 1),), False)
    assert pickle.loads(pickle.dumps(odd)) == odd
    empty = ShardTask("out", "src", "shards", 0, (), False)
    assert pickle.loads(pickle.dumps(empty)) == empty


def test_processes_claim_every_task_once_in_order() -> None:
    counter = multiprocessing.get_context("spawn").Value("q", 0)
    first, second = claimed(5, counter), claimed(5, counter)
    taken = [next(first), next(second), next(second), next(first), next(first)]
    assert taken == [0, 1, 2, 3, 4]
    assert list(first) == [] and list(second) == []


def test_the_lst_is_written_as_format_lst_line_writes_it() -> None:
    files = [
        SourceFile(0, (0.0,), "a/x", 1),
        SourceFile(1, (-0.0,), "a/y", 1),
        SourceFile(2, (1.5, -2.25), "b/z w", 1),
        SourceFile(3, (), "c", 1),
        SourceFile(4, (float("nan"),), "d", 1),
    ]
    expected = "".join(format_lst_line(f.record_id, f.labels, f.key) for f in files)
    assert _lst_text(files) == expected
