"""Pipe mode and manifests on s3:// (a real SeaweedFS on loopback): large objects in parallel
ranged reads, many small ones, gzip, RecordIO, manifests and ``-ref`` objects, and the errors."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests._support.seaweed import SeaweedS3
from tests.agent.channels._support import (
    Host,
    channel,
    read_epoch,
    recordio_records,
    wait_until,
)
from trainops import StorageError
from trainops._settings import MIB, Settings, TransferSettings
from trainops.agent.channels import PipeChannel, open_channel

pytestmark = [pytest.mark.slow, pytest.mark.s3]


@pytest.fixture
def bucket(s3_server: SeaweedS3) -> str:
    return s3_server.create_bucket("pipe")


@pytest.fixture
def host(tmp_path: Path, s3_server: SeaweedS3) -> Host:
    # Small parts and a small budget: a 21 MiB object is read as five ranged GETs of 5 MiB.
    settings = Settings(
        home=tmp_path,
        s3=s3_server.s3_settings,
        transfer=TransferSettings(part_size=5 * MIB, memory=10 * MIB, concurrency=8),
    )
    return Host(tmp_path / "hosts", settings)


def _put(s3_server: SeaweedS3, bucket: str, objects: dict[str, bytes]) -> None:
    client = s3_server.client()
    for key, body in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)


def _pipe(host: Host, uri: str, **fields: Any) -> PipeChannel:
    source = open_channel(channel(uri, mode="Pipe", **fields), host.context())
    assert isinstance(source, PipeChannel)
    source.prepare()
    return source


def test_large_and_small_objects_stream_whole_and_in_order(
    host: Host, s3_server: SeaweedS3, bucket: str
) -> None:
    objects = {f"data/small-{i:03d}": os.urandom(1000 + i) for i in range(60)}
    objects["data/big"] = os.urandom(21 * MIB + 3)
    objects["data/empty"] = b""
    _put(s3_server, bucket, objects)
    source = _pipe(host, f"s3://{bucket}/data/")
    try:
        want = b"".join(objects[key] for key in sorted(objects))
        for epoch in range(2):
            got = read_epoch(host.data_dir, "train", epoch, timeout=60)
            assert hashlib.sha256(got).hexdigest() == hashlib.sha256(want).hexdigest()
    finally:
        source.close()
    # The budget (2.5 MiB) is less than one 5 MiB span: the big object is read one span at a time.
    assert source.read_ahead_budget == 10 * MIB // 4
    assert 0 < source.peak_read_ahead <= 5 * MIB


def test_gzip_and_recordio_from_s3(host: Host, s3_server: SeaweedS3, bucket: str) -> None:
    payloads = {f"gz/{i}.gz": os.urandom(i * 300_000) for i in range(4)}
    _put(s3_server, bucket, {k: gzip.compress(v, compresslevel=1) for k, v in payloads.items()})
    source = _pipe(host, f"s3://{bucket}/gz/", compression="Gzip", record_wrapping="RecordIO")
    try:
        records = recordio_records(read_epoch(host.data_dir, "train", 0, timeout=60))
    finally:
        source.close()
    assert records == [payloads[k] for k in sorted(payloads)]


def test_a_corrupt_gzip_object_on_s3_is_named(
    host: Host, s3_server: SeaweedS3, bucket: str
) -> None:
    _put(s3_server, bucket, {"gz/a.gz": gzip.compress(b"ok"), "gz/b.gz": b"\x1f\x8b broken"})
    source = _pipe(host, f"s3://{bucket}/gz/", compression="Gzip")
    try:
        assert read_epoch(host.data_dir, "train", 0, timeout=60) == b"ok"
        wait_until(lambda: source.failure is not None)
    finally:
        source.close()
    assert source.failure is not None
    assert f"s3://{bucket}/gz/b.gz: not a valid gzip stream" in source.failure


def test_manifests_on_s3_in_file_and_pipe_mode(
    host: Host, s3_server: SeaweedS3, bucket: str
) -> None:
    images = {f"img/{c}/{n}.jpg": f"<{c}{n}>".encode() for c in ("cat", "dog") for n in range(3)}
    keys = ["dog/2.jpg", "cat/0.jpg", "cat/1.jpg"]
    manifest = json.dumps([{"prefix": f"s3://{bucket}/img/"}, *keys]).encode()
    _put(s3_server, bucket, {**images, "manifests/list.json": manifest})
    uri = f"s3://{bucket}/manifests/list.json"
    source = _pipe(host, uri, s3_data_type="ManifestFile", record_wrapping="RecordIO")
    try:
        records = recordio_records(read_epoch(host.data_dir, "train", 0, timeout=60))
    finally:
        source.close()
    assert records == [images[f"img/{key}"] for key in keys]
    file_mode = open_channel(channel(uri, s3_data_type="ManifestFile"), host.context())
    file_mode.prepare()
    file_mode.close()
    for key in keys:
        assert (host.data_dir / "train" / key).read_bytes() == images[f"img/{key}"]


def test_augmented_manifest_fetches_ref_objects_from_s3(
    host: Host, s3_server: SeaweedS3, bucket: str
) -> None:
    images = {f"img/{n}.jpg": os.urandom(2000 + n) for n in range(5)}
    lines = [{"source-ref": f"s3://{bucket}/img/{n}.jpg", "class": str(n % 2)} for n in range(5)]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    _put(s3_server, bucket, {**images, "aug.jsonl": body})
    source = _pipe(
        host,
        f"s3://{bucket}/aug.jsonl",
        s3_data_type="AugmentedManifestFile",
        attribute_names=["source-ref", "class"],
        record_wrapping="RecordIO",
    )
    try:
        records = recordio_records(read_epoch(host.data_dir, "train", 0, timeout=60))
    finally:
        source.close()
    want = [part for n in range(5) for part in (images[f"img/{n}.jpg"], str(n % 2).encode())]
    assert records == want


def test_an_augmented_manifest_naming_a_missing_s3_object_fails_at_once(
    host: Host, s3_server: SeaweedS3, bucket: str
) -> None:
    lines = [
        {"source-ref": f"s3://{bucket}/img/0.jpg"},
        {"source-ref": f"s3://{bucket}/img/gone.jpg"},
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    _put(s3_server, bucket, {"img/0.jpg": b"x", "aug.jsonl": body})
    uri = f"s3://{bucket}/aug.jsonl"
    spec = channel(
        uri, mode="Pipe", s3_data_type="AugmentedManifestFile", attribute_names=["source-ref"]
    )
    source = open_channel(spec, host.context())
    try:
        with pytest.raises(StorageError) as caught:
            source.prepare()
    finally:
        source.close()
    assert str(caught.value) == (
        f"manifest {uri}: line 2: source-ref 's3://{bucket}/img/gone.jpg': no such object"
    )
