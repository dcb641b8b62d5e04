"""``MetadataStore.transaction``: the writes of a block are kept together or not at all; a write
that fails inside and is caught undoes only itself; another connection sees nothing of the block
before it ends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.store._jobs import add_job
from trainops.store import JobExistsError, MetadataStore, TagLimitError


def _committed(path: Path, sql: str) -> list[tuple[object, ...]]:
    """What another connection to the database file reads (only committed rows)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_failing_second_write_leaves_nothing_of_the_block(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = MetadataStore(path)
    try:
        with pytest.raises(TagLimitError), store.transaction():
            add_job(store, "doomed")
            store.put_api_request("training-job", "doomed", {"RoleArn": "arn:aws:iam::1:role/R"})
            store.put_tags("training-job", "doomed", {"team": "a"}, 0)  # over the limit: fails
        assert store.get_job("doomed") is None
        assert store.transitions("doomed") == []
        assert store.api_request("training-job", "doomed") == {}
        assert store.tags("training-job", "doomed") == []
        add_job(store, "later")  # the store goes on writing after the undone block
    finally:
        store.close()
    assert _committed(path, "SELECT name FROM jobs") == [("later",)]
    assert _committed(path, "SELECT COUNT(*) FROM api_requests") == [(0,)]


def test_the_block_is_committed_at_its_end_and_not_before(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = MetadataStore(path)
    try:
        with store.transaction():
            add_job(store, "whole")
            store.put_tags("training-job", "whole", {"team": "a"}, 50)
            assert store.get_job("whole") is not None  # this connection reads its own writes
            assert _committed(path, "SELECT COUNT(*) FROM jobs") == [(0,)]
        assert _committed(path, "SELECT name FROM jobs") == [("whole",)]
        assert _committed(path, "SELECT key, value FROM tags") == [("team", "a")]
    finally:
        store.close()


def test_a_write_that_fails_and_is_caught_inside_undoes_only_itself(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = MetadataStore(path)
    try:
        with store.transaction():
            add_job(store, "kept")
            with pytest.raises(JobExistsError):
                add_job(store, "kept")
            with pytest.raises(TagLimitError):
                store.put_tags("training-job", "kept", {"a": "1", "b": "2"}, 1)
            store.put_tags("training-job", "kept", {"c": "3"}, 1)
    finally:
        store.close()
    assert _committed(path, "SELECT name FROM jobs") == [("kept",)]
    assert _committed(path, "SELECT COUNT(*) FROM transitions") == [(1,)]
    assert _committed(path, "SELECT key FROM tags") == [("c",)]


def test_the_commit_signal_hears_a_block_once_it_commits_and_never_if_it_is_undone(
    tmp_path: Path,
) -> None:
    store = MetadataStore(tmp_path / "t.db")
    heard: list[str] = []
    store.commits.subscribe(heard.append)
    try:
        with store.transaction():
            add_job(store, "kept")
            store.put_tags("training-job", "kept", {"team": "a"}, 50)
            assert heard == []  # nothing is visible to others yet: no follower is woken
        assert heard == ["jobs"]
        with pytest.raises(TagLimitError), store.transaction():
            add_job(store, "doomed")
            store.put_tags("training-job", "doomed", {"team": "a"}, 0)
        assert heard == ["jobs"]  # the undone block told nobody
        add_job(store, "later")
        assert heard == ["jobs", "jobs"]  # and its topics were not left over for the next write
    finally:
        store.close()
