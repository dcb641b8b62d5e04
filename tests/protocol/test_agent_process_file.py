"""``agent.pid``: the agent says which process it is, and only such a record is read back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from trainops.protocol import AGENT_PROCESS_FILE, read_agent_process, record_agent_process


def test_an_agent_records_its_own_pid_and_start_time(tmp_path: Path) -> None:
    record_agent_process(tmp_path)
    assert read_agent_process(tmp_path) == (os.getpid(), psutil.Process().create_time())
    assert [p.name for p in tmp_path.iterdir()] == [AGENT_PROCESS_FILE]  # no partial file left
    assert (tmp_path / AGENT_PROCESS_FILE).stat().st_mode & 0o777 == 0o600


def test_no_record_is_read_where_the_agent_has_written_none(tmp_path: Path) -> None:
    assert read_agent_process(tmp_path) is None
    assert read_agent_process(tmp_path / "missing") is None


@pytest.mark.parametrize(
    "body",
    [
        b"",  # created, not written yet
        b'{"pid": 12',  # cut short
        b'{"pid": "12", "create_time": 1.0}',
        b'{"pid": true, "create_time": 1.0}',
        b'{"pid": 1, "create_time": 1.0}',  # init, never an agent
        b'{"pid": 12, "create_time": "soon"}',
        b'{"pid": 12}',
        b"[12, 1.0]",
        json.dumps({"pid": 12, "create_time": 1.0, "pad": "x" * 300}).encode(),
    ],
)
def test_what_is_not_such_a_record_is_not_read(tmp_path: Path, body: bytes) -> None:
    (tmp_path / AGENT_PROCESS_FILE).write_bytes(body)
    assert read_agent_process(tmp_path) is None


def test_a_link_or_a_fifo_in_its_place_is_neither_followed_nor_waited_on(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"pid": 12, "create_time": 1.0}))
    (tmp_path / AGENT_PROCESS_FILE).symlink_to(real)
    assert read_agent_process(tmp_path) is None
    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / AGENT_PROCESS_FILE)
    assert read_agent_process(fifo_dir) is None


def test_an_unwritable_state_directory_leaves_the_agent_running(tmp_path: Path) -> None:
    record_agent_process(tmp_path / "missing")  # no error: only a crash's recovery is slower
    assert read_agent_process(tmp_path / "missing") is None
