"""Schema migrations: an empty database, a saved version-1 database, a newer database."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from trainops.spec import JobSpec
from trainops.store import (
    HostState,
    MetadataStore,
    Migration,
    NewHost,
    SchemaVersionError,
    apply_migrations,
    load_migrations,
)

V1_FIXTURE = Path(__file__).parent / "assets" / "trainops-v1.db"


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows}


def test_packaged_migrations_are_numbered_from_one() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert migrations[0].name == "0001_initial.sql"


def test_migrations_apply_to_an_empty_database(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "new.db")
    try:
        assert store.schema_version == len(load_migrations())
    finally:
        store.close()
    assert (tmp_path / "new.db").stat().st_mode & 0o077 == 0
    expected = {"jobs", "transitions", "hosts", "log_chunks", "metric_chunks", "artifacts"}
    expected |= {"log_cursor", "schema_version"}
    assert expected <= _tables(tmp_path / "new.db")
    with sqlite3.connect(tmp_path / "new.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_applies_nothing_twice(tmp_path: Path) -> None:
    MetadataStore(tmp_path / "x.db").close()
    store = MetadataStore(tmp_path / "x.db")
    store.close()
    with sqlite3.connect(tmp_path / "x.db") as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_version")]
    assert versions == [m.version for m in load_migrations()]


def test_saved_version_1_database_opens_and_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(V1_FIXTURE, path)
    store = MetadataStore(path)
    try:
        assert store.schema_version == len(load_migrations())
        job = store.get_job("old-job")
        assert job is not None
        assert (job.status, job.billable_seconds, job.attempt) == ("Completed", 59, 1)
        assert [t.status for t in store.transitions("old-job")] == [
            "Starting",
            "Training",
            "Completed",
        ]
        assert [ln.line for ln in store.logs("old-job")] == ["old line 1", "old line 2"]
        assert [(m.name, m.value) for m in store.final_metrics("old-job")] == [("loss", 0.5)]
    finally:
        store.close()


def test_an_agent_handle_of_an_older_version_is_read_as_the_local_backends(
    tmp_path: Path,
) -> None:
    # Before version 6 the local backend's handle had columns of its own (pid, create time):
    # an agent still running across the upgrade must still be found through them.
    path = tmp_path / "old.db"
    shutil.copy(V1_FIXTURE, path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE hosts SET pid = 4242, process_create_time = 1795447368.385685")
    conn.close()
    store = MetadataStore(path)
    try:
        [host] = store.hosts("old-job", 1)
        assert host.handle == {"pid": 4242, "create_time": 1795447368.385685}
        store.update_host("old-job", "algo-1", 1, handle={"actor": "abc", "node": "n1"})
        [host] = store.hosts("old-job", 1)
        assert host.handle == {"actor": "abc", "node": "n1"}  # opaque: kept as given
    finally:
        store.close()


def test_hosts_running_across_the_upgrade_keep_their_jobs_agent_token(tmp_path: Path) -> None:
    # Before version 11 a job had one agent token for all its hosts; since, each host has its
    # own. Agents an older server started must go on reporting after the upgrade (their hosts
    # take the job's token hash); a host that had ended gets none, and the job's column is empty.
    path = tmp_path / "old.db"
    shutil.copy(V1_FIXTURE, path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE jobs SET status = 'InProgress', agent_token_hash = 'cafe'")
        conn.execute("UPDATE hosts SET state = 'Running'")
        conn.execute(
            "INSERT INTO hosts (job, host, attempt, state, root, state_dir)"
            " SELECT job, 'algo-2', attempt, 'Exited', root, state_dir FROM hosts"
        )
    conn.close()
    store = MetadataStore(path)
    try:
        running, ended = store.hosts("old-job", 1)
        assert (running.host, running.token_hash) == ("algo-1", "cafe")
        assert (ended.host, ended.token_hash) == ("algo-2", None)
        credential = store.agent_credential("old-job", "algo-1")
        assert credential is not None and credential.token_hash == "cafe"
        assert store.agent_credential("old-job", "algo-1", attempt=2) is None
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT agent_token_hash FROM jobs").fetchall() == [(None,)]
    conn.close()


def test_a_host_that_ends_loses_its_token(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "x.db")
    try:
        job = store.create_job(
            name="j",
            spec=JobSpec(entry_point="train.py").view(),
            code_uri="file:///c",
            output_prefix="file:///o",
            max_attempts=1,
            status="InProgress",
            secondary_status="Starting",
            message="",
            now=1.0,
        )
        hosts = [NewHost(h, "/r", "/s", token_hash=f"hash-{h}") for h in ("algo-1", "algo-2")]
        store.create_hosts(job.name, 1, hosts)
        assert [h.token_hash for h in store.hosts("j", 1)] == ["hash-algo-1", "hash-algo-2"]
        store.update_host("j", "algo-1", 1, state=HostState.EXITED)
        assert [h.token_hash for h in store.hosts("j", 1)] == [None, "hash-algo-2"]
        store.revoke_agent_tokens("j")
        assert [h.token_hash for h in store.hosts("j", 1)] == [None, None]
    finally:
        store.close()


def test_saved_version_1_database_upgrades_through_a_later_migration(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(V1_FIXTURE, path)
    later = Migration(
        version=len(load_migrations()) + 1,
        name="9999_test_note.sql",
        sql="ALTER TABLE jobs ADD COLUMN note TEXT;\nUPDATE jobs SET note = 'upgraded';\n",
    )
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        assert apply_migrations(conn, [*load_migrations(), later]) == later.version
        rows = conn.execute("SELECT name, note FROM jobs").fetchall()
    finally:
        conn.close()
    assert rows == [("old-job", "upgraded")]


def test_a_failed_migration_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(V1_FIXTURE, path)
    broken = Migration(2, "0002_broken.sql", "CREATE TABLE extra (x INTEGER);\nNOT SQL AT ALL;\n")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError):
            apply_migrations(conn, [*load_migrations()[:1], broken])
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == 1
    finally:
        conn.close()
    assert "extra" not in _tables(path)


def test_a_database_from_a_newer_trainops_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    shutil.copy(V1_FIXTURE, path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (99, 'future', 0)"
        )
    with pytest.raises(SchemaVersionError, match=r"schema version 99.*newer trainops"):
        MetadataStore(path)
