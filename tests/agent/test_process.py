"""ScriptProcess and StopControl on real processes: line handling, leftovers, stop requests."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from tests.agent._support import RecordingReporter
from trainops.agent import ScriptProcess
from trainops.agent.supervision._process import MAX_LINE_BYTES
from trainops.agent.supervision._stop import StopControl
from trainops.protocol import Command


class _Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, stream: str, lines: list[str], ts: float) -> None:
        with self.lock:
            self.lines.extend((stream, line) for line in lines)


def _run(code: str, tmp_path: Path) -> tuple[int, _Lines, ScriptProcess]:
    sink = _Lines()
    process = ScriptProcess(
        [sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ), on_line=sink
    )
    process.start()
    return process.finish(), sink, process


def test_long_lines_are_kept_whole_and_bad_bytes_decoded(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'a' * (10 * 1024 * 1024) + b'\\n')\n"
        "sys.stdout.buffer.write(b'bad \\xff byte\\r\\n')\n"
        "sys.stdout.buffer.write(b'nul \\x00 byte\\n\\n')\n"
        "sys.stderr.write('no newline at the end')\n"
    )
    returncode, sink, process = _run(code, tmp_path)
    assert returncode == 0
    stdout = [line for stream, line in sink.lines if stream == "stdout"]
    assert len(stdout[0]) == 10 * 1024 * 1024
    assert stdout[1:] == ["bad \ufffd byte", "nul \x00 byte", ""]
    assert list(process.stderr_tail) == ["no newline at the end"]


def test_a_line_beyond_the_limit_is_passed_on_in_pieces(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        f"sys.stdout.buffer.write(b'x' * ({MAX_LINE_BYTES} + 5) + b'\\nafter\\n')\n"
        "sys.stdout.buffer.write(os.urandom(200000))\n"
    )
    returncode, sink, _process = _run(code, tmp_path)
    assert returncode == 0
    stdout = [line for stream, line in sink.lines if stream == "stdout"]
    assert [len(line) for line in stdout[:3]] == [MAX_LINE_BYTES, 5, 5]
    assert stdout[2] == "after"
    assert len(stdout) > 3  # the random bytes came through, whatever their newlines


def test_every_line_of_a_fast_writer_arrives_in_order(tmp_path: Path) -> None:
    code = "import sys\nfor i in range(200000): print(f'line {i}')\n"
    returncode, sink, _process = _run(code, tmp_path)
    assert returncode == 0
    assert [line for _stream, line in sink.lines] == [f"line {i}" for i in range(200000)]


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


def test_both_streams_arrive_whole_when_interleaved(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for i in range(50000):\n"
        "    print(f'out {i}')\n"
        "    if i % 3 == 0: print(f'err {i}', file=sys.stderr)\n"
        "sys.stdout.write('out tail')\n"
    )
    returncode, sink, process = _run(code, tmp_path)
    assert returncode == 0
    out = [line for stream, line in sink.lines if stream == "stdout"]
    err = [line for stream, line in sink.lines if stream == "stderr"]
    assert out == [f"out {i}" for i in range(50000)] + ["out tail"]
    assert err == [f"err {i}" for i in range(0, 50000, 3)]
    assert list(process.stderr_tail)[-1] == "err 49998"


def test_exit_callbacks_run_once_before_the_reap_and_at_once_after_it(tmp_path: Path) -> None:
    go = tmp_path / "go"
    wait_for_go = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)"
    process = ScriptProcess(
        [sys.executable, "-c", wait_for_go], cwd=tmp_path, env=dict(os.environ), on_line=_Lines()
    )
    process.start()
    seen: list[str] = []
    process.when_exited(lambda: seen.append("early"))
    assert len(process.capture_threads()) == 2  # the reader of both pipes and the exit watcher
    assert seen == []  # it waits for "go"
    go.touch()
    assert process.finish() == 0
    assert seen == ["early"]
    process.when_exited(lambda: seen.append("late"))
    assert seen == ["early", "late"]


INTERLEAVED = """
import fcntl, logging, struct, sys, termios
logging.basicConfig(level=logging.INFO, format="%(message)s")

def drained():  # until the agent has read both pipes empty (FIONREAD works on either end)
    while any(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"0000"))[0] for fd in (1, 2)):
        pass

for step in range(20):
    print(f"print {step}")  # two writes: the text and its newline
    logging.info("logging %d", step)  # one write, right behind them
    drained()
print("before the raise", flush=True)
raise RuntimeError("boom")
"""


def test_stdout_and_stderr_keep_the_order_they_were_written_in(tmp_path: Path) -> None:
    # Each step writes stdout and then stderr back to back, faster than any reader wakes: the
    # kernel's order of the two pipes becoming readable keeps them in the order written.
    returncode, sink, _process = _run(INTERLEAVED, tmp_path)
    assert returncode == 1
    steps = [(s, f"{w} {n}") for n in range(20) for s, w in (("stdout", "print"),
             ("stderr", "logging"))]  # fmt: skip
    expected = [
        *steps,
        ("stdout", "before the raise"),
        ("stderr", "Traceback (most recent call last):"),
    ]
    assert sink.lines[: len(expected)] == expected


def test_the_reader_sees_the_end_of_output_written_just_before_the_exit(tmp_path: Path) -> None:
    # The writers' end comes with the last data, reported once: the reader must read on to it
    # rather than wait for an end it was already told of (and be given up on after 5 s).
    code = "import sys\nsys.stdout.buffer.write(b'x' * (3 * 1024 * 1024) + b'\\nthe end')\n"
    for _ in range(3):
        returncode, sink, process = _run(code, tmp_path)
        assert returncode == 0 and sink.lines[-1] == ("stdout", "the end")
        ours = set(process.capture_threads())
        assert not [t for t in threading.enumerate() if t.native_id in ours and t.is_alive()]
