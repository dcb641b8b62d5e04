"""The tags table (schema version 15): tags survive reopening the database, a merge over the
limit writes nothing, and a resource is found by its name in any case."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store._jobs import add_job
from trainops.store import MetadataStore, TagLimitError


def _store_with_job(path: Path, name: str) -> MetadataStore:
    store = MetadataStore(path)
    add_job(store, name, message="")
    return store


def test_tags_are_kept_across_a_reopen(tmp_path: Path) -> None:
    store = _store_with_job(tmp_path / "t.db", "Mixed-Case")
    assert store.tagged_name("training-job", "mixed-case") == "Mixed-Case"
    assert store.tagged_name("training-job", "other") is None
    assert store.tagged_name("hyper-parameter-tuning-job", "mixed-case") is None
    store.put_tags("training-job", "Mixed-Case", {"b": "2", "a": "1"}, 50)
    store.put_tags("training-job", "Mixed-Case", {"b": "two"}, 50)
    store.delete_tags("training-job", "Mixed-Case", ["missing"])
    store.close()
    reopened = MetadataStore(tmp_path / "t.db")
    try:
        assert reopened.tags("training-job", "Mixed-Case") == [("a", "1"), ("b", "two")]
        reopened.delete_tags("training-job", "Mixed-Case", ["a"])
        assert reopened.tags("training-job", "Mixed-Case") == [("b", "two")]
    finally:
        reopened.close()


def test_a_merge_over_the_limit_writes_nothing(tmp_path: Path) -> None:
    store = _store_with_job(tmp_path / "t.db", "job")
    try:
        store.put_tags("training-job", "job", {"a": "1", "b": "2"}, 3)
        with pytest.raises(TagLimitError) as caught:
            store.put_tags("training-job", "job", {"b": "new", "c": "3", "d": "4"}, 3)
        assert caught.value.count == 4
        assert store.tags("training-job", "job") == [("a", "1"), ("b", "2")]
        store.put_tags("training-job", "job", {"b": "new", "c": "3"}, 3)  # overwrites count once
        assert len(store.tags("training-job", "job")) == 3
    finally:
        store.close()
