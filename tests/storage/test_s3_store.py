"""s3:// specifics beyond the shared contract: buckets as prefixes, multipart, credentials."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests._support.seaweed import SeaweedS3
from trainops import StorageError
from trainops._settings import MIB, S3Settings, Settings, TransferSettings
from trainops.storage import store_for

pytestmark = pytest.mark.s3


@pytest.mark.parametrize("suffix", ["", "/"])
def test_a_bucket_is_a_prefix(s3_settings: Settings, s3_bucket: str, suffix: str) -> None:
    store = store_for(f"s3://{s3_bucket}", s3_settings)
    store.put_bytes(f"s3://{s3_bucket}/top.txt", b"1")
    store.put_bytes(f"s3://{s3_bucket}/dir/inner.txt", b"22")
    found = store.list_objects(f"s3://{s3_bucket}{suffix}")
    assert [(o.key, o.uri, o.size) for o in found] == [
        ("dir/inner.txt", f"s3://{s3_bucket}/dir/inner.txt", 2),
        ("top.txt", f"s3://{s3_bucket}/top.txt", 1),
    ]


def test_a_missing_bucket_lists_nothing_and_does_not_exist(s3_settings: Settings) -> None:
    store = store_for("s3://trainops-no-such-bucket/x", s3_settings)
    assert store.list_objects("s3://trainops-no-such-bucket/x") == []
    assert not store.exists("s3://trainops-no-such-bucket/x/y")


def test_big_uploads_are_multipart_with_the_configured_part_size(
    s3_server: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    transfer = TransferSettings(concurrency=3, part_size=5 * MIB, memory=20 * MIB)
    store = store_for(
        f"s3://{s3_bucket}", Settings(home=tmp_path, s3=s3_server.s3_settings, transfer=transfer)
    )
    src = tmp_path / "big.bin"
    src.write_bytes(b"p" * (4 * 5 * MIB + 1))
    store.upload(src, f"s3://{s3_bucket}/big.bin")
    etag = s3_server.client().head_object(Bucket=s3_bucket, Key="big.bin")["ETag"]
    assert etag.strip('"').endswith("-5")  # S3 names a multipart object's ETag by its part count


def test_credentials_stay_out_of_reprs_and_errors(s3_server: SeaweedS3, s3_bucket: str) -> None:
    secret = "not-the-secret-" + "x" * 20
    wrong = S3Settings(
        endpoint_url=s3_server.endpoint_url,
        region=s3_server.region,
        access_key_id=s3_server.access_key,
        secret_access_key=secret,
    )
    store = store_for(f"s3://{s3_bucket}/k", Settings(home=Path("unused"), s3=wrong))
    messages = [repr(store), repr(wrong)]
    for action in (
        lambda: store.get_bytes(f"s3://{s3_bucket}/k"),
        lambda: store.put_bytes(f"s3://{s3_bucket}/k", b"v"),
        lambda: store.list_objects(f"s3://{s3_bucket}/"),
    ):
        with pytest.raises(StorageError) as caught:
            action()
        messages.append(str(caught.value))
    assert all(secret not in m and "x" * 20 not in m for m in messages)
    assert any("cannot" in m for m in messages[2:])


@pytest.mark.parametrize(
    "uri",
    [
        "s3:///key",
        "s3://bkt/a//b",
        "s3://bkt/a/../b",
        "s3://bkt/./x",
        "s3://Bad_Bucket!/k",
        "s3://bkt/\x00",
    ],
)
def test_hostile_uris_are_storage_errors(s3_settings: Settings, uri: str) -> None:
    store = store_for("s3://bkt/x", s3_settings)
    for action in (
        lambda: store.get_bytes(uri),
        lambda: store.put_bytes(uri, b"x"),
        lambda: store.list_objects(uri),
        lambda: store.exists(uri),
    ):
        with pytest.raises(StorageError) as caught:
            action()
        message = str(caught.value)
        assert uri in message or repr(uri) in message, message
        assert s3_settings.s3.secret_access_key not in message


def test_an_object_replaced_between_its_ranges_arrives_whole(
    s3_server: SeaweedS3, s3_bucket: str, tmp_path: Path
) -> None:
    """The ranges of a download are pinned to the ETag the download began with.

    The test holds the store's whole byte budget, so the download stops after its HEAD, before
    its first range; the object is then replaced by a longer one. Unpinned ranges would deliver
    the first bytes of the new object cut to the old length; pinned ones fail and the download
    starts over on the new version.
    """
    transfer = TransferSettings(part_concurrency=1, part_size=5 * MIB, memory=10 * MIB)
    settings = Settings(home=tmp_path, s3=s3_server.s3_settings, transfer=transfer)
    store = store_for(f"s3://{s3_bucket}", settings)
    uri = f"s3://{s3_bucket}/replaced.bin"
    store.put_bytes(uri, b"1" * (3 * 5 * MIB))
    new = b"2" * (4 * 5 * MIB)
    budget = store.budget  # type: ignore[attr-defined]
    dest = tmp_path / "out.bin"
    failures: list[BaseException] = []

    def download() -> None:
        try:
            store.download(uri, dest)
        except BaseException as exc:
            failures.append(exc)

    with budget.hold(budget.limit):
        worker = threading.Thread(target=download)
        worker.start()
        deadline = time.monotonic() + 30
        while budget.waiting == 0:
            assert time.monotonic() < deadline, "the download never reached its first range"
            time.sleep(0.005)
        store.put_bytes(uri, new)
    worker.join()
    assert failures == []
    assert dest.read_bytes() == new


@pytest.mark.parametrize(
    ("bucket", "rule"),
    [
        ("Bad_Bucket!", "lower-case letters, digits, dots and hyphens"),
        ("ab", "3 to 63 characters"),
        ("a" * 64, "3 to 63 characters"),
        ("-bucket", "begin and end with a letter or digit"),
        ("my..bucket", "two dots"),
        ("192.168.0.1", "IP address"),
        ("xn--bucket", "begin with 'xn--'"),
        ("bucket-s3alias", "end with '-s3alias'"),
    ],
)
def test_a_bad_bucket_name_is_refused_by_the_client(bucket: str, rule: str) -> None:
    # The endpoint is a closed port: a refusal that came from a server could not name the rule.
    closed = S3Settings(
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key_id="id",
        secret_access_key="not-a-secret",
    )
    store = store_for("s3://bkt/x", Settings(home=Path("unused"), s3=closed))
    uri = f"s3://{bucket}/k"
    for action in (
        lambda: store.get_bytes(uri),
        lambda: store.put_bytes(uri, b"x"),
        lambda: store.list_objects(uri),
        lambda: store.exists(uri),
    ):
        with pytest.raises(StorageError) as caught:
            action()
        message = str(caught.value)
        assert repr(uri) in message and rule in message, message
        assert "bucket naming rules" in message
