"""The log and metric path under load and hostile output: the journal cap, batched events sent
exactly once, long and binary lines, and metric regexes that would never finish."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

from tests.agent._support import RecordingAgentApi, RecordingReporter, make_job
from tests.control._harness import wait_for
from trainops.agent import AgentClient, EventJournal, HostAgent, HttpReporter, MetricScraper
from trainops.agent.reporting._hostlog import MAX_REPORTED_CHARS, HostLog
from trainops.agent.reporting._metrics import MetricScanner
from trainops.agent.reporting._reporter import JOURNAL_BUFFER_BYTES
from trainops.protocol import Command, EventKind, HostOutcome

TOKEN = "agent-token"
CATASTROPHIC = r"(a+)+$"
EVIL_LINE = "a" * 40 + "!"


def _client(url: str, server_file: Path | None = None) -> AgentClient:
    return AgentClient(url, TOKEN, "job-1", "algo-1", server_file=server_file)


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _lines_of(events: list[dict[str, object]]) -> list[str]:
    found: list[str] = []
    for event in events:
        data = event["data"]
        assert isinstance(data, dict)
        found += data["lines"] if "lines" in data else [data["line"]]
    return found


def test_a_server_that_is_away_fills_the_journal_up_to_its_cap_not_memory(
    tmp_path: Path,
) -> None:
    server_file = tmp_path / "server.json"
    journal = tmp_path / "journal.jsonl"
    reporter = HttpReporter(
        _client(_dead_url(), server_file), 1, journal, journal_cap=256 * 1024
    ).start()
    batch = [f"line {i:06d} " + "x" * 80 for i in range(1000)]
    seqs = [
        reporter.emit(EventKind.LOG, {"stream": "stdout", "lines": batch}).seq for _ in range(8)
    ]
    # About 100 KiB per event: the third one crosses the cap; later ones are not recorded.
    assert seqs[:3] == [1, 1001, 2001] and seqs[3:] == [0] * 5
    assert reporter.buffered_bytes <= JOURNAL_BUFFER_BYTES
    assert reporter.emit(EventKind.PHASE, {"phase": "Uploading", "message": ""}).seq > 3000
    deadline = time.monotonic() + 10
    while not (warnings := _agent_lines(journal)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the sender writes the journal's buffer out within its backoff
    assert len(warnings) == 1 and "journal cap" in warnings[0] and "host.log" in warnings[0]

    with RecordingAgentApi(None, TOKEN) as api:
        server_file.write_text(json.dumps({"url": api.url}))
        api.wait_for(lambda: reporter.unsent_bytes == 0, timeout=30)
        # Caught up: the script's output is reported again, with a count of what was not.
        after = reporter.emit(EventKind.LOG, {"stream": "stdout", "line": "back"})
        assert after.seq > 0
        assert reporter.close(timeout=30)
        stored = api.events()
    assert reporter.acked_seq == after.seq
    assert _lines_of([e for e in stored if e["kind"] == "log"]) == [
        *batch, *batch, *batch, warnings[0],
        "WARNING: reporting the script's output again; 5000 log line(s) and 0 metric point(s)"
        " were not reported (see host.log)",
        "back",
    ]  # fmt: skip


def _agent_lines(journal: Path) -> list[str]:
    """The agent lines of the journal's complete lines (the sender may be writing the last)."""
    text = journal.read_text(encoding="utf-8") if journal.exists() else ""
    complete = text[: text.rfind("\n") + 1]
    events = [json.loads(line) for line in complete.splitlines() if line.strip()]
    return [str(e["data"]["line"]) for e in events if e["data"].get("stream") == "agent"]


def test_batched_events_arrive_exactly_once_across_lost_replies_and_small_batches(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "journal.jsonl"
    with RecordingAgentApi(None, TOKEN, drop_replies=3) as api:
        reporter = HttpReporter(_client(api.url), 1, journal, max_batch_bytes=4096).start()
        sent: list[str] = []
        for i in range(300):
            lines = [f"event {i} line {j}" for j in range(i % 7 + 1)]
            sent += lines
            reporter.emit(EventKind.LOG, {"stream": "stdout", "lines": lines})
            reporter.emit(EventKind.METRIC, {"name": "loss", "timestamp": 1.0, "values": [i, i]})
        last = reporter.emit(EventKind.EXIT, {"outcome": "Completed", "exit_code": 0})
        assert reporter.close(timeout=30)
    assert reporter.acked_seq == last.seq == len(sent) + 600 + 1
    assert api.acked() == last.seq
    assert len(api.received_seqs) > len(api.stored)  # some batches were sent twice ...
    assert _lines_of(api.events(EventKind.LOG)) == sent  # ... and stored once
    assert [e.seq for e in EventJournal.read(journal)] == sorted(api.stored)


def test_long_lines_are_reported_cut_with_a_marker_and_kept_whole_in_host_log(
    tmp_path: Path,
) -> None:
    reporter = RecordingReporter()
    log = HostLog(tmp_path / "host.log", reporter, MetricScraper([]))
    long = "y" * (10 * 1024 * 1024)
    log.lines("stdout", ["short", long, "bad \ufffd nul \x00 end"], 1.0)
    log.close()
    short, cut, binary = reporter.lines("stdout")
    assert short == "short" and binary == "bad \ufffd nul \x00 end"
    assert cut == "y" * MAX_REPORTED_CHARS + (
        f"… [trainops: line cut at {MAX_REPORTED_CHARS} of {len(long)} characters]"
    )
    written = (tmp_path / "host.log").read_text().split("\n")
    assert written[1] == long


def test_a_catastrophic_metric_regex_is_disabled_and_the_others_still_scan(
    tmp_path: Path,
) -> None:
    found: list[tuple[str, float, list[float]]] = []
    warnings: list[str] = []
    scraper = MetricScraper([("slow", CATASTROPHIC), ("loss", r"loss=([0-9.]+)")])
    scanner = MetricScanner(
        scraper, lambda *point: found.append(point), warnings.append, budget_seconds=0.5
    )
    scanner.submit(["loss=1", EVIL_LINE, "loss=2"], 10.0)
    scanner.submit(["loss=3", "aaaa"], 11.0)
    assert scanner.drain(timeout=30)
    scanner.close()
    assert found == [("loss", 10.0, [1.0, 2.0]), ("loss", 11.0, [3.0])]
    [warning] = warnings
    assert "'slow' is disabled" in warning and "(a+)+$" in warning and "0.5 s" in warning


def test_a_worker_waiting_for_a_core_does_not_disable_a_fast_regex() -> None:
    """A loaded machine: the worker gets no CPU for four budgets of wall time while it holds
    a line (here it is stopped). The budget is the worker's CPU time, so the pattern stays on."""
    found: list[tuple[str, float, list[float]]] = []
    warnings: list[str] = []
    scraper = MetricScraper([("loss", r"loss=([0-9.]+)")])
    scanner = MetricScanner(
        scraper, lambda *point: found.append(point), warnings.append, budget_seconds=0.5
    )
    scanner.submit(["loss=1"], 10.0)
    assert scanner.drain(timeout=30)
    worker = scanner._worker
    assert worker is not None
    os.kill(worker._proc.pid, signal.SIGSTOP)
    try:
        scanner.submit(["loss=2"], 11.0)
        assert not scanner.drain(timeout=2.0)  # four budgets of wall time, no CPU
    finally:
        os.kill(worker._proc.pid, signal.SIGCONT)
    assert scanner.drain(timeout=30)
    scanner.close()
    assert found == [("loss", 10.0, [1.0]), ("loss", 11.0, [2.0])]
    assert warnings == []


def test_the_scanner_starts_its_worker_before_the_first_line() -> None:
    found: list[tuple[str, float, list[float]]] = []
    scanner = MetricScanner(
        MetricScraper([("loss", r"loss=([0-9.]+)")]), lambda *p: found.append(p), print
    )
    try:
        worker = wait_for(lambda: scanner._worker, what="the worker started with no line yet")
        assert worker._proc.args[1:3] == ["-I", "-S"]  # no site: it starts once per job
        scanner.submit(["loss=0.5"], 1.0)
        assert scanner.drain(timeout=30)
        assert found == [("loss", 1.0, [0.5])] and scanner._worker is worker  # the same one
    finally:
        scanner.close()
    assert worker._proc.poll() is not None  # and it ends with the scanner


def test_a_catastrophic_regex_blocks_neither_output_nor_heartbeats_nor_stop(
    tmp_path: Path,
) -> None:
    script = (
        "import sys, time\n"
        f"print({EVIL_LINE!r})\n"
        "print('loss=0.25')\n"
        "print('after the evil line', flush=True)\n"
        "time.sleep(120)\n"
    )
    job = make_job(
        tmp_path,
        {"train.py": script},
        metric_definitions=[
            {"name": "evil", "regex": CATASTROPHIC},
            {"name": "loss", "regex": r"loss=([0-9.]+)"},
        ],
    )
    with RecordingAgentApi(job.assignment, TOKEN) as api:
        reporter = HttpReporter(
            _client(api.url), 1, job.state_dir / "journal.jsonl", heartbeat=0.1
        ).start()
        agent = HostAgent(job.assignment, root=job.root, state_dir=job.state_dir, reporter=reporter)
        result: list[object] = []
        runner = threading.Thread(target=lambda: result.append(agent.run()), daemon=True)
        runner.start()
        # The evil regex runs from its line until its budget (2 s) runs out and it is disabled:
        # heartbeats (every 0.1 s) go on in between, counted in posts, not in seconds.
        api.wait_for(lambda: any("metric 'evil' is disabled" in ln for ln in api.log_lines()))
        between = api.post_of("metric 'evil' is disabled") - api.post_of("after the evil line")
        assert between >= 3, between
        with api.lock:
            api.commands.append(Command("stop", reason="user", grace_seconds=1))
        runner.join(timeout=30)
        assert not runner.is_alive()
        assert reporter.close(timeout=30)
        lines = api.log_lines()
        values = [
            (e["data"]["name"], e["data"].get("values")) for e in api.events(EventKind.METRIC)
        ]
    assert [r.outcome for r in result] == [HostOutcome.STOPPED]  # type: ignore[attr-defined]
    assert ("loss", [0.25]) in values
    assert any("metric 'evil' is disabled" in line for line in lines)
