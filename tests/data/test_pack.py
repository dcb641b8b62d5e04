"""The packer as a library: plans, labels, formats read back by the readers, determinism,
hostile sources (links out of SRC, FIFOs, bad .lst lines) and refused destinations."""

from __future__ import annotations

import io
import itertools
import json
import os
from pathlib import Path

import pytest

from tests.data._tree import make_tree, tree_bytes
from trainops.cli._parser import build_parser
from trainops.data import (
    PackError,
    PackOptions,
    RecordIOReader,
    ShardIndex,
    ShardReader,
    TFRecordReader,
    decode_example,
    pack,
    read_idx,
    unpack_irheader,
)
from trainops.data.packer._formats import FORMATS
from trainops.data.packer._local_files import walk_local
from trainops.data.packer._pack import plan_shards
from trainops.data.packer._source import SourceFile, SourceReader
from trainops.data.shards._index import FORMATS as INDEX_FORMATS


def options(**kwargs: object) -> PackOptions:
    return PackOptions(**{"shard_size": 20_000, **kwargs})  # type: ignore[arg-type]


def test_the_plan_cuts_at_the_shard_size_and_keeps_big_files_alone() -> None:
    files = [SourceFile(i, (0.0,), f"f{i}", size) for i, size in enumerate([36, 36, 36, 500, 10])]
    assert plan_shards(files, 200) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert plan_shards(files, 10_000) == [(0, 5)]
    # Sizes not listed count as the estimate: the same cuts as above with 36 known.
    unknown = [f._replace(size=-1) if f.size == 36 else f for f in files]
    assert plan_shards(unknown, 200, estimate=36) == [(0, 2), (2, 3), (3, 4), (4, 5)]


def test_a_local_listing_samples_sizes_and_reads_the_rest_whole(tmp_path: Path) -> None:
    for i in range(600):
        (tmp_path / f"{i:04d}.bin").write_bytes(b"x" * (i % 7))
    sizes = walk_local(str(tmp_path))
    known = {key: size for key, size in sizes.items() if size >= 0}
    assert 256 <= len(known) < 600  # a sample, at least MIN_SAMPLE of them
    assert all(size == int(key[:4]) % 7 for key, size in known.items())
    unknown = next(key for key, size in sizes.items() if size < 0)
    assert SourceReader(str(tmp_path)).read(unknown, -1) == b"x" * (int(unknown[:4]) % 7)
    assert walk_local(str(tmp_path)) == sizes  # the same sample every time


def _records(dest: Path, fmt: str) -> list[tuple[int, tuple[float, ...] | float, bytes, str]]:
    """(id, label, data, key) of every record, in shard order, read with the readers."""
    index = ShardIndex.parse((dest / "index.json").read_bytes())
    out = []
    for shard in index.shards:
        keys = [
            line.split("\t")[-1]
            for line in (dest / shard.name).with_suffix(".lst").read_text().splitlines()
        ]
        if fmt == "shards":
            with ShardReader.open(dest / shard.name, sha256=shard.sha256) as reader:
                payloads = [bytes(r) for r in reader]
        else:
            reader_type = RecordIOReader if fmt == "recordio" else TFRecordReader
            with open(dest / shard.name, "rb") as handle:
                payloads = list(reader_type(handle))
        assert len(payloads) == shard.records
        for payload, key in zip(payloads, keys, strict=True):
            if fmt == "tfrecord":
                example = decode_example(payload)
                assert example["key"] == [key.encode()]
                out.append(
                    (int(example["id"][0]), tuple(example["label"]), bytes(example["data"][0]), key)
                )  # type: ignore[arg-type]
            else:
                header, data = unpack_irheader(payload)
                out.append((header.id, header.label, data, key))
    return out


ROUND_TRIPPED = ["shards", "recordio", "tfrecord"]


def test_every_format_is_round_tripped_here_and_offered_by_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert sorted(FORMATS) == sorted(ROUND_TRIPPED)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pack", "--help"])
    pack_help = capsys.readouterr().out
    for name in FORMATS:
        assert build_parser().parse_args(["pack", "a", "b", "--format", name]).format == name
        assert name in pack_help


def test_every_format_writes_an_index_format_the_index_accepts() -> None:
    assert {fmt.index_format for fmt in FORMATS.values()} == set(INDEX_FORMATS)


@pytest.mark.parametrize("fmt", FORMATS.names())
def test_every_format_round_trips_with_folder_labels(tmp_path: Path, fmt: str) -> None:
    files = make_tree(tmp_path / "src", {"cat": 30, "dog": 25, "emu": 5})
    result = pack(str(tmp_path / "src"), str(tmp_path / "out"), options(format=fmt))
    assert result.written == len(result.index.shards) > 2
    assert result.index.total_records == 60
    assert result.config["classes"] == ["cat", "dog", "emu"]
    records = _records(tmp_path / "out", fmt)
    assert [key for *_, key in records] == sorted(files)
    labels = {"cat": 0, "dog": 1, "emu": 2}
    for number, (record_id, label, data, key) in enumerate(records):
        assert record_id == number
        assert data == files[key]
        want = labels[key.split("/")[0]]
        assert label == ((want,) if fmt == "tfrecord" else float(want))
    assert not (tmp_path / "out" / ".pack").exists()


def test_recordio_idx_offsets_find_their_records(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src", {"a": 20})
    pack(str(tmp_path / "src"), str(tmp_path / "out"), options(format="recordio"))
    rec = tmp_path / "out" / "part-00001.rec"
    with open(rec.with_suffix(".idx"), "rb") as handle:
        entries = read_idx(handle, source=str(rec.with_suffix(".idx")))
    data = rec.read_bytes()
    for record_id, offset in entries:
        payload = next(iter(RecordIOReader(io.BytesIO(data[offset:]))))
        header, body = unpack_irheader(payload)
        assert header.id == record_id
        assert body == files[f"a/{record_id:04d}.bin"]


def test_tfrecord_idx_gives_offset_and_size(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 12})
    pack(str(tmp_path / "src"), str(tmp_path / "out"), options(format="tfrecord"))
    shard = tmp_path / "out" / "part-00000.tfrecord"
    lines = [
        tuple(map(int, line.split())) for line in shard.with_suffix(".idx").read_text().splitlines()
    ]
    assert lines[0][0] == 0
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(lines))
    assert lines[-1][0] + lines[-1][1] == shard.stat().st_size


def test_the_output_is_the_same_whatever_the_worker_count(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"x": 40, "y": 40})
    pack(str(tmp_path / "src"), str(tmp_path / "one"), options(workers=1))
    pack(str(tmp_path / "src"), str(tmp_path / "two"), options(workers=2))
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")


def test_a_label_list_picks_files_order_ids_and_labels(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src", {"a": 3, "b": 2})
    lst = tmp_path / "train.lst"
    lst.write_text("7\t1.5\t2\tb/0001.bin\n3\t0.000000\ta/0000.bin\n")
    result = pack(
        str(tmp_path / "src"), str(tmp_path / "out"), options(labels=lst, format="recordio")
    )
    assert result.config["float_labels"] is True
    records = _records(tmp_path / "out", "recordio")
    assert records == [
        (7, (1.5, 2.0), files["b/0001.bin"], "b/0001.bin"),
        (3, 0.0, files["a/0000.bin"], "a/0000.bin"),
    ]
    assert (
        tmp_path / "out" / "part-00000.lst"
    ).read_text() == "7\t1.500000\t2.000000\tb/0001.bin\n3\t0.000000\ta/0000.bin\n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("0\t1\tmissing.bin", r"line 1: missing.bin is not a file under SRC"),
        ("0\t1\t../outside.bin", r"line 1: '../outside.bin' is not a path inside SRC"),
        ("0\t1\t/etc/passwd", r"line 1: '/etc/passwd' is not a path inside SRC"),
        ("zero\t1\ta/0000.bin", r"line 1: the index 'zero' is not a whole number"),
        ("0\tcat\ta/0000.bin", r"line 1: labels must be numbers"),
        ("0\tnan\ta/0000.bin", r"line 1: labels must be finite numbers"),
        ("0\ta/0000.bin", r"line 1: expected index<TAB>label...<TAB>path"),
        ("0\t1\ta/0000.bin\n0\t1\ta/0001.bin", r"line 2: id 0 appears twice"),
        ("0\t1\t" + "x" * 70_000, r"line 1: longer than 65536 bytes"),
    ],
)
def test_a_bad_label_list_names_the_line(tmp_path: Path, line: str, message: str) -> None:
    make_tree(tmp_path / "src", {"a": 2})
    (tmp_path / "outside.bin").write_bytes(b"secret")
    lst = tmp_path / "bad.lst"
    lst.write_text(line + "\n")
    with pytest.raises(PackError, match=rf"{lst}: {message}"):
        pack(str(tmp_path / "src"), str(tmp_path / "out"), options(labels=lst))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_links_hidden_files_and_fifos_are_never_packed(tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src", {"a": 3})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.bin").write_bytes(b"secret")
    os.symlink(outside / "secret.bin", tmp_path / "src" / "a" / "link.bin")
    os.symlink(outside, tmp_path / "src" / "a" / "linked-dir")
    os.symlink(outside, tmp_path / "src" / "b")
    os.mkfifo(tmp_path / "src" / "a" / "fifo.bin")
    (tmp_path / "src" / "a" / ".hidden").write_bytes(b"x")
    result = pack(str(tmp_path / "src"), str(tmp_path / "out"), options())
    assert result.index.total_records == 3
    assert result.config["classes"] == ["a"]
    assert sorted(key for *_, key in _records(tmp_path / "out", "shards")) == sorted(files)


def test_a_file_swapped_for_a_link_or_resized_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real.bin").write_bytes(b"12345")
    os.symlink(tmp_path / "real.bin", tmp_path / "link.bin")
    with pytest.raises(
        PackError, match=r"cannot read .*link.bin: Too many levels of symbolic links"
    ):
        SourceReader(str(tmp_path)).read("link.bin", 5)
    with pytest.raises(PackError, match=r"real.bin: changed while packing \(4 bytes listed\)"):
        SourceReader(str(tmp_path)).read("real.bin", 4)


def test_a_folder_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "src" / "cat").mkdir(parents=True)
    (tmp_path / "src" / "cat" / "a.bin").write_bytes(b"inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.bin").write_bytes(b"secret")
    with SourceReader(str(tmp_path / "src")) as reader:
        assert reader.read("cat/a.bin", 6) == b"inside"
    (tmp_path / "src" / "cat").rename(tmp_path / "src" / "gone")
    os.symlink(tmp_path / "outside", tmp_path / "src" / "cat")
    with (
        SourceReader(str(tmp_path / "src")) as reader,
        pytest.raises(PackError, match=r"cannot read .*/src/cat/a.bin: Not a directory"),
    ):
        reader.read("cat/a.bin", 6)


def test_an_empty_or_missing_source_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackError, match="holds no files to pack"):
        pack(str(tmp_path / "empty"), str(tmp_path / "out"), options())
    with pytest.raises(PackError, match="not a directory"):
        pack(str(tmp_path / "nope"), str(tmp_path / "out"), options())


def test_loose_files_beside_class_folders_are_refused(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"cat": 2})
    (tmp_path / "src" / "loose.bin").write_bytes(b"x")
    with pytest.raises(
        PackError, match=r"mixes files \(loose.bin\) with class folders \(cat/...\)"
    ):
        pack(str(tmp_path / "src"), str(tmp_path / "out"), options())


def test_files_without_folders_all_get_label_zero(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / f"{i}.txt").write_bytes(b"line %d" % i)
    pack(str(tmp_path / "src"), str(tmp_path / "out"), options(format="recordio"))
    assert [label for _, label, *_ in _records(tmp_path / "out", "recordio")] == [0.0] * 3


def test_destinations_that_are_refused(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 5})
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(PackError, match=r"busy is not empty \(it holds notes.txt\)"):
        pack(str(tmp_path / "src"), str(tmp_path / "busy"), options())
    with pytest.raises(PackError, match="overlap: pick a DEST outside SRC"):
        pack(str(tmp_path / "src"), str(tmp_path / "src" / "out"), options())
    with pytest.raises(PackError, match="overlap"):
        pack(str(tmp_path / "src"), str(tmp_path), options())
    (tmp_path / "file").write_text("x")
    with pytest.raises(PackError, match="exists and is not a directory"):
        pack(str(tmp_path / "src"), str(tmp_path / "file"), options())


def test_repacking_the_same_is_a_no_op_and_a_different_one_is_refused(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 30})
    first = pack(str(tmp_path / "src"), str(tmp_path / "out"), options())
    before = tree_bytes(tmp_path / "out")
    again = pack(str(tmp_path / "src"), str(tmp_path / "out"), options())
    assert (again.written, again.kept) == (0, first.written)
    assert tree_bytes(tmp_path / "out") == before
    with pytest.raises(PackError, match="format: 'shards' there, 'recordio' now"):
        pack(str(tmp_path / "src"), str(tmp_path / "out"), options(format="recordio"))
    (tmp_path / "src" / "a" / "new.bin").write_bytes(b"new")
    with pytest.raises(PackError, match=r"the files under SRC .* are not the same"):
        pack(str(tmp_path / "src"), str(tmp_path / "out"), options())


def test_an_unfinished_pack_is_continued_only_with_its_own_configuration(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 40})
    full = pack(str(tmp_path / "src"), str(tmp_path / "ref"), options())
    out = tmp_path / "out"
    pack(str(tmp_path / "src"), str(out), options())
    # An interrupted run: the index not yet written, shard 1's marker and data lost, shard 2
    # whole but unmarked, a staging directory left behind.
    config = json.loads((out / "index.json").read_text())["config"]
    (out / "index.json").unlink()
    (out / ".pack").mkdir()
    (out / ".pack" / "plan.json").write_text(json.dumps(config))
    for shard in full.index.shards:
        number = int(shard.name[5:10])
        if number != 1 and number != 2:
            (out / ".pack" / f"part-{number:05d}.json").write_text(
                json.dumps(
                    {
                        "name": shard.name,
                        "records": shard.records,
                        "bytes": shard.bytes,
                        "sha256": shard.sha256,
                    }
                )
            )
    (out / "part-00001.tops").unlink()
    (out / ".pack" / "tmp-leftover").mkdir()
    (out / ".pack" / "tmp-leftover" / "part-00001.tops").write_bytes(b"half")
    with pytest.raises(PackError, match=r"unfinished pack made differently .*shard_size"):
        pack(str(tmp_path / "src"), str(out), options(shard_size=30_000))
    resumed = pack(str(tmp_path / "src"), str(out), options())
    assert (resumed.written, resumed.kept) == (2, len(full.index.shards) - 2)
    assert tree_bytes(out) == tree_bytes(tmp_path / "ref")


def test_bad_options_are_named(tmp_path: Path) -> None:
    make_tree(tmp_path / "src", {"a": 1})
    with pytest.raises(
        PackError,
        match=r"^--format: unknown pack format 'tar' \(known: recordio, tfrecord, shards\)$",
    ):
        pack(str(tmp_path / "src"), str(tmp_path / "out"), options(format="tar"))
    with pytest.raises(PackError, match="--workers must be 1 or more"):
        pack(str(tmp_path / "src"), str(tmp_path / "out"), options(workers=0))


def test_a_file_swapped_for_a_fifo_or_a_folder_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.bin")
    (tmp_path / "folder.bin").mkdir()
    for name in ("fifo.bin", "folder.bin"):
        for size in (5, -1):  # listed or not, the open file is checked
            with pytest.raises(
                PackError, match=rf"{name}: changed while packing \(no longer a regular file\)"
            ):
                SourceReader(str(tmp_path)).read(name, size)
