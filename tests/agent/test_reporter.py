"""HttpReporter and AgentClient against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent._support import RecordingAgentApi, make_job
from trainops.agent import AgentApiError, AgentClient, EventJournal, HttpReporter, fetch_assignment
from trainops.protocol import Command, EventKind

TOKEN = "agent-token"


def _client(url: str, server_file: Path | None = None) -> AgentClient:
    return AgentClient(url, TOKEN, "job-1", "algo-1", server_file=server_file)


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_events_arrive_exactly_once_when_a_reply_is_lost(tmp_path: Path) -> None:
    journal = tmp_path / "state" / "journal.jsonl"
    with RecordingAgentApi(None, TOKEN, drop_replies=1) as api:
        reporter = HttpReporter(_client(api.url), 1, journal).start()
        for i in range(1200):
            reporter.emit(EventKind.LOG, {"stream": "stdout", "line": f"line {i}"})
        reporter.emit(
            EventKind.EXIT, {"outcome": "Completed", "exit_code": 0, "failure_reason": None}
        )
        assert reporter.close(timeout=30)
        assert reporter.acked_seq == 1201
    assert sorted(api.stored) == list(range(1, 1202))
    assert len(api.received_seqs) > 1201  # the batch whose reply was lost was sent again
    assert api.events(EventKind.EXIT)[0]["data"]["outcome"] == "Completed"
    assert [e.seq for e in EventJournal.read(journal)] == list(range(1, 1202))
    assert EventJournal.read(journal)[5].data == {"stream": "stdout", "line": "line 5"}


def test_heartbeats_carry_commands_back(tmp_path: Path) -> None:
    with RecordingAgentApi(None, TOKEN) as api:
        reporter = HttpReporter(_client(api.url), 1, tmp_path / "journal.jsonl", heartbeat=0.05)
        reporter.start()
        api.commands.append(Command("stop", reason="user", grace_seconds=3))
        api.wait_for(lambda: api.posts >= 3)
        received: list[Command] = []

        def got_command() -> bool:
            received.extend(reporter.commands())
            return bool(received)

        api.wait_for(got_command)
        assert reporter.close(timeout=5)
    assert received == [Command("stop", reason="user", grace_seconds=3)]
    assert api.stored == {}


def test_a_quiet_host_s_heartbeat_slows_and_news_brings_it_back(tmp_path: Path) -> None:
    with RecordingAgentApi(None, TOKEN) as api:
        reporter = HttpReporter(
            _client(api.url), 1, tmp_path / "journal.jsonl", heartbeat=0.05, quiet_after=0.3
        )
        now = time.monotonic()
        assert reporter._interval(now) == 0.05  # busy until proven quiet
        assert reporter._interval(now + 0.3) == 0.1  # nothing sent or received for a while
        reporter.start()
        api.wait_for(lambda: reporter._interval(time.monotonic()) == 0.1)  # heartbeats alone
        api.commands.append(Command("stop", reason="user", grace_seconds=3))
        api.wait_for(lambda: bool(reporter.commands()))  # a command: busy again
        assert reporter._interval(time.monotonic()) == 0.05
        api.wait_for(lambda: reporter._interval(time.monotonic()) == 0.1)
        reporter.emit(EventKind.PHASE, {"phase": "Training", "message": ""})
        api.wait_for(lambda: bool(api.events(EventKind.PHASE)))  # an event: busy again
        assert reporter._interval(time.monotonic()) == 0.05
        assert reporter.close(timeout=5)


def test_a_moved_server_is_found_through_server_json(tmp_path: Path) -> None:
    server_file = tmp_path / "server.json"
    with RecordingAgentApi(None, TOKEN) as api:
        reporter = HttpReporter(
            _client(_dead_url(), server_file), 1, tmp_path / "journal.jsonl"
        ).start()
        reporter.emit(EventKind.PHASE, {"phase": "Downloading", "message": ""})
        server_file.write_text(json.dumps({"url": api.url}))
        assert reporter.close(timeout=30)
    assert [e["data"]["phase"] for e in api.events(EventKind.PHASE)] == ["Downloading"]


def test_close_gives_up_after_its_timeout_but_the_journal_keeps_everything(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    reporter = HttpReporter(_client(_dead_url()), 1, journal).start()
    reporter.emit(EventKind.EXIT, {"outcome": "Failed", "exit_code": 1, "failure_reason": "x"})
    assert reporter.close(timeout=0.3) is False
    assert reporter.last_error is not None and "cannot reach" in reporter.last_error
    [event] = EventJournal.read(journal)
    assert event.kind is EventKind.EXIT


def test_close_waits_past_its_timeout_while_the_store_is_full(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    with RecordingAgentApi(None, TOKEN) as api:
        api.full = True
        reporter = HttpReporter(_client(api.url), 1, journal).start()
        for i in range(500):
            reporter.emit(EventKind.LOG, {"stream": "stdout", "line": f"line {i}"})
        reporter.emit(EventKind.EXIT, {"outcome": "Completed", "exit_code": 0})
        closed: list[bool] = []
        closing = threading.Thread(target=lambda: closed.append(reporter.close(timeout=0.2)))
        closing.start()
        # Well past the timeout, the reporter is still asking the full store.
        api.wait_for(lambda: api.refused >= 5)
        assert closing.is_alive() and not closed
        assert reporter.last_error is not None and "HTTP 507" in reporter.last_error
        api.full = False
        closing.join(timeout=60)
        assert closed == [True]
    assert api.log_lines() == [f"line {i}" for i in range(500)]
    assert api.events(EventKind.EXIT)[0]["data"]["outcome"] == "Completed"


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only; the test skips elsewhere)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path) -> None:
    with contextlib.suppress(OSError), (disk / "filler").open("wb", buffering=0) as filler:
        while True:
            filler.write(b"x" * 4096)


def test_events_the_full_journal_cannot_take_are_sent_from_memory(tiny_disk: Path) -> None:
    journal = tiny_disk / "journal.jsonl"
    with RecordingAgentApi(None, TOKEN) as api:
        reporter = HttpReporter(_client(api.url), 1, journal, heartbeat=0.05).start()
        _fill(tiny_disk)
        for i in range(3000):
            reporter.emit(EventKind.LOG, {"stream": "stdout", "line": f"line {i}"})
        reporter.emit(EventKind.EXIT, {"outcome": "Completed", "exit_code": 0})
        assert reporter.close(timeout=30)
        assert reporter.journal_error is not None  # the disk is still full
    assert api.log_lines() == [f"line {i}" for i in range(3000)]
    assert api.events(EventKind.EXIT)[0]["data"]["outcome"] == "Completed"


def test_with_the_journal_and_the_store_full_events_are_kept_until_one_frees(
    tiny_disk: Path,
) -> None:
    journal = tiny_disk / "journal.jsonl"
    with RecordingAgentApi(None, TOKEN) as api:
        api.full = True
        reporter = HttpReporter(_client(api.url), 1, journal, heartbeat=0.05).start()
        _fill(tiny_disk)
        for i in range(3000):
            reporter.emit(EventKind.LOG, {"stream": "stdout", "line": f"line {i}"})
        reporter.emit(EventKind.EXIT, {"outcome": "Completed", "exit_code": 0})
        closed: list[bool] = []
        closing = threading.Thread(target=lambda: closed.append(reporter.close(timeout=0.2)))
        closing.start()
        # Well past the timeout the reporter still holds what neither disk could take.
        api.wait_for(lambda: api.refused >= 5)
        assert closing.is_alive() and not closed
        assert reporter.journal_error is not None
        (tiny_disk / "filler").unlink()  # the agent's disk frees first: it journals them
        api.wait_for(lambda: journal.stat().st_size > 0 and reporter.journal_error is None)
        assert closing.is_alive() and not closed  # the store still answers 507
        api.full = False
        closing.join(timeout=60)
        assert closed == [True]
    assert api.log_lines() == [f"line {i}" for i in range(3000)]
    assert [e.seq for e in EventJournal.read(journal)] == list(range(1, 3002))


def test_fetch_assignment_and_its_errors(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": ""})
    with RecordingAgentApi(job.assignment, TOKEN) as api:
        good = _client(api.url)
        assert fetch_assignment(good, 1) == job.assignment
        good.close()
        bad = AgentClient(api.url, "wrong", "job-1", "algo-1")
        with pytest.raises(AgentApiError, match="HTTP 401") as caught:
            fetch_assignment(bad, 1)
        bad.close()
        assert not caught.value.retryable
    with pytest.raises(AgentApiError, match="cannot reach"):
        fetch_assignment(_client(_dead_url()), 1, deadline_s=0.2)


def test_the_token_is_sent_but_never_in_error_messages(tmp_path: Path) -> None:
    with RecordingAgentApi(None, TOKEN) as api:
        client = AgentClient(api.url, "s3cr3t-value", "job-1", "algo-1")
        with pytest.raises(AgentApiError) as caught:
            client.post_events(1, [])
        client.close()
    assert "s3cr3t-value" not in str(caught.value)


@pytest.mark.parametrize("server", ["store full", "unreachable"])
def test_a_journal_that_stays_full_is_given_up_on_saying_what_is_lost(
    tiny_disk: Path, server: str, capfd: pytest.CaptureFixture[str]
) -> None:
    journal = tiny_disk / "journal.jsonl"
    with RecordingAgentApi(None, TOKEN) as api:
        api.full = True
        url = api.url if server == "store full" else _dead_url()
        reporter = HttpReporter(
            _client(url), 1, journal, heartbeat=0.05, give_up_seconds=0.5
        ).start()
        _fill(tiny_disk)  # and it stays full
        for i in range(3000):
            reporter.emit(EventKind.LOG, {"stream": "stdout", "line": f"line {i}"})
        reporter.emit(EventKind.EXIT, {"outcome": "Completed", "exit_code": 0})
        closed: list[bool] = []
        closing = threading.Thread(target=lambda: closed.append(reporter.close(timeout=0.2)))
        closing.start()
        closing.join(timeout=60)
        still_open = closing.is_alive()
        api.full = False  # lets a reporter that did not give up end
        closing.join(timeout=60)
    assert not still_open and closed == [False] and reporter.gave_up
    [line] = [x for x in capfd.readouterr().err.splitlines() if "giving up" in x]
    assert line.startswith("trainops agent: giving up after 0.5 s more: 3001 events")
    assert f"the journal {journal} cannot be written" in line and "No space left" in line
    says = "store is full (HTTP 507)" if server == "store full" else "cannot reach"
    assert says in line and line.endswith("free space on the journal's disk")


def test_a_host_whose_token_is_refused_for_good_is_disowned_and_closes_at_once(
    tmp_path: Path,
) -> None:
    """Every post answered 401 for the whole window (the control plane revoked the token: the
    host was declared lost, or its attempt ended): the reporter says the host is disowned, and
    its close stops asking at once instead of for its whole timeout."""
    journal = tmp_path / "journal.jsonl"
    with RecordingAgentApi(None, TOKEN) as api:
        revoked = AgentClient(api.url, "revoked-token", "job-1", "algo-1")
        reporter = HttpReporter(revoked, 1, journal, disowned_after=0.3).start()
        reporter.emit(EventKind.LOG, {"stream": "stdout", "line": "still training"})
        deadline = time.monotonic() + 30.0  # a wait that never ends is a failure
        while reporter.disowned is None:
            assert time.monotonic() < deadline, reporter.last_error
            time.sleep(0.02)
        assert "refused this host's reports" in reporter.disowned
        assert "401" in reporter.disowned and "revoked-token" not in reporter.disowned
        closed: list[bool] = []
        closing = threading.Thread(target=lambda: closed.append(reporter.close(timeout=600)))
        closing.start()
        closing.join(30.0)
        assert closed == [False]  # not delivered, and not waited for
    assert api.log_lines() == []
    assert [e.data["line"] for e in EventJournal.read(journal)] == ["still training"]


def test_a_refusal_other_than_unauthorized_disowns_nothing(tmp_path: Path) -> None:
    with RecordingAgentApi(None, TOKEN) as api:
        api.full = True  # refused, but not unauthorized
        reporter = HttpReporter(_client(api.url), 1, tmp_path / "j", disowned_after=0.0).start()
        reporter.emit(EventKind.LOG, {"stream": "stdout", "line": "x"})
        api.wait_for(lambda: api.refused >= 3)
        assert reporter.disowned is None
        api.full = False
        assert reporter.close(timeout=30) is True
        assert reporter.disowned is None
