"""ScriptProcess and StopControl on real processes: line handling, leftovers, stop requests."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from tests.agent._support import RecordingReporter
from trainops.agent import ScriptProcess
from trainops.agent._process import LINE_CAP
from trainops.agent._stop import StopControl
from trainops.protocol import Command


class _Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, stream: str, line: str, ts: float) -> None:
        with self.lock:
            self.lines.append((stream, line))


def _run(code: str, tmp_path: Path) -> tuple[int, _Lines, ScriptProcess]:
    sink = _Lines()
    process = ScriptProcess(
        [sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), on_line=sink
    )
    process.start()
    return process.finish(), sink, process


def test_lines_are_split_capped_and_decoded(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'a' * (70 * 1024) + b'\\n')\n"
        "sys.stdout.buffer.write(b'bad \\xff byte\\r\\n')\n"
        "sys.stderr.write('no newline at the end')\n"
    )
    returncode, sink, process = _run(code, tmp_path)
    assert returncode == 0
    stdout = [line for stream, line in sink.lines if stream == "stdout"]
    assert [len(line) for line in stdout[:2]] == [LINE_CAP, 70 * 1024 - LINE_CAP]
    assert stdout[2] == "bad \ufffd byte"
    assert list(process.stderr_tail) == ["no newline at the end"]


def test_what_the_script_leaves_behind_in_its_group_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
    )
    returncode, _sink, _process = _run(code, tmp_path)
    assert returncode == 0
    child = int(pid_file.read_text())
    # SIGKILL is delivered asynchronously, and the orphan may linger as a zombie until init
    # reaps it: wait until it is gone or a zombie (a live orphan would sleep for 600 s).
    status = Path(f"/proc/{child}/status")
    deadline = time.monotonic() + 60
    while status.exists() and "State:\tZ" not in _read(status):
        assert time.monotonic() < deadline, "the orphaned child is still alive"
        time.sleep(0.02)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_a_later_stop_request_only_shortens_the_grace() -> None:
    stop = StopControl(grace_seconds=120)
    assert not stop.requested
    stop.request("SIGTERM")
    assert (stop.reason, stop.grace_seconds) == ("SIGTERM", 120)
    reporter = RecordingReporter()
    reporter.push(Command("stop", reason="max runtime", grace_seconds=5))
    reporter.push(Command("other"))
    stop.poll(reporter)
    assert (stop.reason, stop.grace_seconds) == ("SIGTERM", 5)
    stop.request("again", 60)
    assert stop.grace_seconds == 5
