"""Manifests: ManifestFile in File and Pipe mode, AugmentedManifestFile in Pipe mode, and every
bad manifest failing with one line that names the manifest and the entry or line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent.channels._support import (
    Host,
    channel,
    read_epoch,
    recordio_records,
)
from trainops import StorageError
from trainops._settings import Settings
from trainops.agent.channels import _manifest as manifest_module
from trainops.agent.channels import open_channel


@pytest.fixture
def images(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    for rel in ["cats/1.jpg", "cats/2.jpg", "dogs/7.jpg", "dogs/8.jpg", "unlisted.jpg"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(f"<{rel}>".encode())
    return root


def _write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / "manifests" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, list) and name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(row) + "\n" for row in content))
    else:
        path.write_text(json.dumps(content))
    return path.as_uri()


def _manifest(tmp_path: Path, images: Path, keys: list[str]) -> str:
    return _write(tmp_path, "list.json", [{"prefix": images.as_uri() + "/"}, *keys])


KEYS = ["dogs/8.jpg", "cats/1.jpg", "dogs/7.jpg"]


def test_file_mode_downloads_what_the_manifest_lists(
    host: Host, tmp_path: Path, images: Path
) -> None:
    uri = _manifest(tmp_path, images, KEYS)
    source = open_channel(channel(uri, s3_data_type="ManifestFile"), host.context())
    source.prepare()
    source.close()
    got = sorted(
        p.relative_to(host.data_dir / "train").as_posix() for p in host.data_dir.rglob("*.jpg")
    )
    assert got == sorted(KEYS)
    assert (host.data_dir / "train" / "dogs" / "8.jpg").read_bytes() == b"<dogs/8.jpg>"


def test_file_mode_shards_manifest_entries(tmp_path: Path, images: Path) -> None:
    uri = _manifest(tmp_path, images, [*KEYS, "cats/2.jpg"])
    found: list[str] = []
    for name in ["algo-1", "algo-2"]:
        host = Host(tmp_path / "hosts", Settings(home=tmp_path), ["algo-1", "algo-2"], name)
        spec = channel(uri, s3_data_type="ManifestFile", distribution="ShardedByKey")
        source = open_channel(spec, host.context())
        source.prepare()
        source.close()
        found += [p.name for p in (host.data_dir / "train").rglob("*.jpg")]
    assert sorted(found) == ["1.jpg", "2.jpg", "7.jpg", "8.jpg"]


def test_pipe_mode_streams_the_manifest_in_its_order(
    host: Host, tmp_path: Path, images: Path
) -> None:
    uri = _manifest(tmp_path, images, KEYS)
    source = open_channel(
        channel(uri, mode="Pipe", s3_data_type="ManifestFile", record_wrapping="RecordIO"),
        host.context(),
    )
    source.prepare()
    try:
        want = [f"<{key}>".encode() for key in KEYS]
        assert recordio_records(read_epoch(host.data_dir, "train", 0)) == want
        assert recordio_records(read_epoch(host.data_dir, "train", 1)) == want
    finally:
        source.close()


def test_pipe_mode_shuffles_manifest_entries_per_epoch(
    host: Host, tmp_path: Path, images: Path
) -> None:
    keys = [f"{kind}/{n}.jpg" for kind in ("cats", "dogs") for n in (1, 2, 7, 8)]
    for key in keys:
        (images / key).write_bytes(f"<{key}>".encode())
    uri = _manifest(tmp_path, images, keys)
    spec = channel(
        uri, mode="Pipe", s3_data_type="ManifestFile", record_wrapping="RecordIO", shuffle_seed=1
    )
    source = open_channel(spec, host.context())
    source.prepare()
    try:
        epochs = [recordio_records(read_epoch(host.data_dir, "train", e)) for e in range(3)]
    finally:
        source.close()
    for got in epochs:
        assert sorted(got) == sorted(f"<{key}>".encode() for key in keys)
    assert epochs[0] != epochs[1] != epochs[2]


LINES = [
    {"source-ref": "IMG/cats/1.jpg", "label": 1, "meta": {"w": 2}, "note": "a cat"},
    {"source-ref": "IMG/dogs/7.jpg", "label": 0, "meta": {"w": 3}, "note": "ünï"},
]


def _augmented(tmp_path: Path, images: Path, lines: list[dict[str, Any]]) -> str:
    rows = [
        {k: v.replace("IMG", images.as_uri()) if k.endswith("-ref") else v for k, v in row.items()}
        for row in lines
    ]
    return _write(tmp_path, "aug.jsonl", rows)


@pytest.mark.parametrize("wrapping", ["RecordIO", "None"])
def test_augmented_manifest_streams_each_attribute_as_a_record(
    host: Host, tmp_path: Path, images: Path, wrapping: str
) -> None:
    uri = _augmented(tmp_path, images, LINES)
    spec = channel(
        uri,
        mode="Pipe",
        s3_data_type="AugmentedManifestFile",
        attribute_names=["source-ref", "label", "note", "meta"],
        record_wrapping=wrapping,
    )
    source = open_channel(spec, host.context())
    source.prepare()
    try:
        stream = read_epoch(host.data_dir, "train", 0)
    finally:
        source.close()
    want = [b"<cats/1.jpg>", b"1", b"a cat", b'{"w":2}']
    want += [b"<dogs/7.jpg>", b"0", "ünï".encode(), b'{"w":3}']
    assert (recordio_records(stream) if wrapping == "RecordIO" else stream) == (
        want if wrapping == "RecordIO" else b"".join(want)
    )


def test_augmented_manifest_lines_are_shuffled_whole(
    host: Host, tmp_path: Path, images: Path
) -> None:
    lines = [{"source-ref": f"IMG/{key}", "label": i} for i, key in enumerate(sorted(KEYS) * 3)]
    uri = _augmented(tmp_path, images, lines)
    spec = channel(
        uri,
        mode="Pipe",
        s3_data_type="AugmentedManifestFile",
        attribute_names=["label", "source-ref"],
        record_wrapping="RecordIO",
        shuffle_seed=7,
    )
    source = open_channel(spec, host.context())
    source.prepare()
    try:
        epochs = [recordio_records(read_epoch(host.data_dir, "train", e)) for e in range(2)]
    finally:
        source.close()
    for records in epochs:
        pairs = list(zip(records[::2], records[1::2], strict=True))
        assert len(pairs) == 9
        for label, image in pairs:  # each line's records stay together, in attribute order
            assert image == f"<{sorted(KEYS)[int(label) % 3]}>".encode()
    assert epochs[0] != epochs[1]


def _fails(host: Host, uri: str, **fields: Any) -> str:
    source = open_channel(channel(uri, mode="Pipe", **fields), host.context())
    try:
        with pytest.raises(StorageError) as caught:
            source.prepare()
    finally:
        source.close()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"manifest {uri}: "), message
    return message


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"[{", "the file: not valid JSON (Expecting property name"),
        (b"\xff\xfe[]", "the file: not UTF-8 (byte 0)"),
        ({"prefix": "s3://b/"}, "not a JSON array starting with"),
        ([], "not a JSON array starting with"),
        ([{"prefix": "s3://b/", "extra": 1}, "a"], "not a JSON array starting with"),
        ([{"prefix": "no-scheme/"}, "a"], "entry 0: prefix 'no-scheme/' must be a URI"),
        ([{"prefix": "PREFIX"}], "lists no objects"),
        ([{"prefix": "PREFIX"}, "cats/1.jpg", 7], "entry 2: 7 is not a relative key"),
        ([{"prefix": "PREFIX"}, "../secret"], "entry 1 ('../secret'): a key may not"),
        ([{"prefix": "PREFIX"}, "cats/../../x"], "entry 1 ('cats/../../x'): a key may not"),
        ([{"prefix": "PREFIX"}, "/etc/passwd"], "entry 1 ('/etc/passwd'): a key may not"),
        ([{"prefix": "PREFIX"}, "cats/1.jpg", "cats/9.jpg"], "entry 2 ('cats/9.jpg'): no object"),
    ],
)
def test_a_bad_manifest_file_is_one_clear_error(
    host: Host, tmp_path: Path, images: Path, content: Any, problem: str
) -> None:
    head = content[0] if isinstance(content, list) and content else None
    if isinstance(head, dict) and head.get("prefix") == "PREFIX":
        head["prefix"] = images.as_uri() + "/"
    uri = _write(tmp_path, "bad.json", content)
    assert problem in _fails(host, uri, s3_data_type="ManifestFile")


def test_a_manifest_entry_that_is_a_link_out_of_the_prefix_is_no_object(
    host: Host, tmp_path: Path, images: Path
) -> None:
    (tmp_path / "secret").write_text("secret")
    (images / "cats" / "evil.jpg").symlink_to(tmp_path / "secret")
    uri = _manifest(tmp_path, images, ["cats/evil.jpg"])
    assert "entry 1 ('cats/evil.jpg'): no object" in _fails(host, uri, s3_data_type="ManifestFile")


def test_a_missing_or_huge_manifest_is_refused_before_reading_it(
    host: Host, tmp_path: Path, images: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = (tmp_path / "nowhere.json").as_uri()
    assert "no such object" in _fails(host, missing, s3_data_type="ManifestFile")
    uri = _manifest(tmp_path, images, KEYS)
    monkeypatch.setattr(manifest_module, "MAX_MANIFEST_BYTES", 16)
    assert "a manifest may hold 16" in _fails(host, uri, s3_data_type="ManifestFile")


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (b'{"source-ref": "x"}\nnot json\n', "line 2: not valid JSON"),
        (b'{"source-ref": "x"}\n[1, 2]\n', "line 2: not a JSON object"),
        (b"\n\n", "has no lines"),
        (b'{"label": 1}\n', "line 1: no attribute 'source-ref'"),
        (b'{"source-ref": 5, "label": 1}\n', "line 1: source-ref 5 is not a URI"),
        (b'\n{"source-ref": "IMG/cats/9.jpg", "label": 1}\n', "line 2: source-ref"),
        (b'{"source-ref": "IMG/cats/../dogs/7.jpg", "label": 1}\n', "no such object"),
    ],
)
def test_a_bad_augmented_manifest_is_one_clear_error(
    host: Host, tmp_path: Path, images: Path, lines: bytes, problem: str
) -> None:
    uri = _write(tmp_path, "bad.jsonl", lines.replace(b"IMG", images.as_uri().encode()))
    message = _fails(
        host,
        uri,
        s3_data_type="AugmentedManifestFile",
        attribute_names=["source-ref", "label"],
    )
    assert problem in message
