"""s3:// specifics beyond the shared contract: whole buckets as prefixes, missing buckets."""

from __future__ import annotations

import pytest

from trainops._settings import Settings
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
