"""The assignment a backend hands its agent in the agent's state directory: taken once, private,
and only when it is this launch's own."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from tests.agent._support import make_job
from trainops.protocol import (
    ASSIGNMENT_FILE,
    AgentLaunch,
    hand_over_assignment,
    take_handed_assignment,
)


def _launch(tmp_path: Path) -> AgentLaunch:
    job = make_job(tmp_path, {"train.py": "print('hi')"}, hyperparameters={"lr": "0.0123456"})
    job.state_dir.mkdir(parents=True, mode=0o700)
    return AgentLaunch(
        server_url="http://127.0.0.1:1",
        token="a-token-never-written",
        job_name=job.assignment.job_name,
        host=job.assignment.current_host,
        attempt=job.assignment.attempt,
        root=job.root,
        state_dir=job.state_dir,
        assignment=job.assignment,
    )


def test_a_handed_assignment_is_read_back_once_and_is_private(tmp_path: Path) -> None:
    launch = _launch(tmp_path)
    hand_over_assignment(launch)
    path = launch.state_dir / ASSIGNMENT_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "a-token-never-written" not in path.read_text()
    assert take_handed_assignment(launch) == launch.assignment
    assert not path.exists()
    assert take_handed_assignment(launch) is None  # taken: the agent asks the API instead


def test_the_launch_variables_never_carry_the_assignment(tmp_path: Path) -> None:
    launch = _launch(tmp_path)
    assert "0.0123456" not in json.dumps(launch.env())
    assert "assignment" not in repr(launch)


@pytest.mark.parametrize(
    "change",
    [{"current_host": "algo-2"}, {"attempt": 2}, {"job_name": "another-job"}],
    ids=["another host", "another attempt", "another job"],
)
def test_an_assignment_that_is_not_this_launchs_own_is_not_taken(
    tmp_path: Path, change: dict[str, object]
) -> None:
    launch = _launch(tmp_path)
    assert launch.assignment is not None
    other = dataclasses.replace(launch, assignment=dataclasses.replace(launch.assignment, **change))
    hand_over_assignment(other)
    assert take_handed_assignment(launch) is None
    assert not (launch.state_dir / ASSIGNMENT_FILE).exists()


@pytest.mark.parametrize(
    "body",
    [b"", b'{"job_name": "job-1"', b"[1, 2]", b'{"job_name": "job-1"}', b"\xff\xfe"],
    ids=["empty", "cut short", "not an object", "fields missing", "not utf-8"],
)
def test_a_malformed_handed_assignment_is_not_taken(tmp_path: Path, body: bytes) -> None:
    launch = _launch(tmp_path)
    (launch.state_dir / ASSIGNMENT_FILE).write_bytes(body)
    assert take_handed_assignment(launch) is None


def test_nothing_is_handed_over_without_an_assignment_or_over_an_existing_file(
    tmp_path: Path,
) -> None:
    launch = _launch(tmp_path)
    hand_over_assignment(dataclasses.replace(launch, assignment=None))
    assert not (launch.state_dir / ASSIGNMENT_FILE).exists()
    (launch.state_dir / ASSIGNMENT_FILE).write_text("planted")
    hand_over_assignment(launch)  # never written through a file someone else made
    assert (launch.state_dir / ASSIGNMENT_FILE).read_text() == "planted"


def test_an_assignment_planted_by_someone_without_the_token_is_not_taken(tmp_path: Path) -> None:
    """A script on a machine without namespaces runs as the agents' user: it could write a
    file where a later job's agent looks, naming that job. Without the job's token it cannot
    make the MAC, and a MAC made with another token does not pass."""
    launch = _launch(tmp_path)
    assert launch.assignment is not None
    forged = dataclasses.replace(launch.assignment, code_uri="file:///tmp/attacker.tar.gz")
    hand_over_assignment(dataclasses.replace(launch, assignment=forged, token="guessed"))
    assert take_handed_assignment(launch) is None
    path = launch.state_dir / ASSIGNMENT_FILE
    text = json.dumps(forged.to_json())
    for planted in ({"assignment": text}, {"assignment": text, "mac": ""}, forged.to_json()):
        path.write_text(json.dumps(planted))
        assert take_handed_assignment(launch) is None


@pytest.mark.parametrize("kind", ["fifo", "link to a device", "link to a real assignment"])
def test_only_a_regular_file_is_read_never_a_fifo_or_a_link(tmp_path: Path, kind: str) -> None:
    """A FIFO with no writer would hold the agent forever, and a link could lead anywhere:
    neither is read, and the agent asks the API instead."""
    launch = _launch(tmp_path)
    path = launch.state_dir / ASSIGNMENT_FILE
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to a device":
        path.symlink_to("/dev/zero")
    else:
        elsewhere = dataclasses.replace(launch, state_dir=tmp_path / "elsewhere")
        elsewhere.state_dir.mkdir()
        hand_over_assignment(elsewhere)  # a valid one, MAC and all, reached through the link
        path.symlink_to(elsewhere.state_dir / ASSIGNMENT_FILE)
    taken: list[object] = []
    reader = threading.Thread(target=lambda: taken.append(take_handed_assignment(launch)))
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # let the test end: a writer opens the FIFO, the read sees its end
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
        pytest.fail("the agent waited on what was planted as its assignment")
    assert taken == [None]
    assert not path.exists() and not path.is_symlink()
