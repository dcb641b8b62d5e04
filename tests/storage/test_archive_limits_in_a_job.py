"""The archive limits reach the host agent: a source directory over them fails the job clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e._harness import trainops, write_job

pytestmark = pytest.mark.slow


def test_a_source_over_the_member_limit_fails_with_the_archive_and_entry(tmp_path: Path) -> None:
    job = write_job(tmp_path / "job", "print('never runs')\n", job_name="too-many-files")
    for i in range(3):
        (tmp_path / "job" / "src" / f"extra_{i}.py").write_text("")
    home = tmp_path / "home"
    result = trainops("run", str(job), home=home, TRAINOPS_ARCHIVE_MAX_MEMBERS="3")
    assert result.returncode != 0
    assert "never runs" not in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert (
        "ArchiveError: sourcedir.tar.gz: entry 'train.py' rejected: the archive has more than "
        "3 entries (limit archive.max_members)"
    ) in result.stdout + result.stderr
