"""The agent's side of a rule's command action: run once per id, with the job's environment
and nothing else, no shell, bounded in time and output, and always reported."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainops.agent.supervision._actions import OUTPUT_BYTES, ActionRunner
from trainops.protocol import Command


class Runner:
    """An :class:`ActionRunner` that runs argv as given and keeps its reports."""

    def __init__(self, tmp_path: Path, *, contained: bool = True) -> None:
        self.reports: list[dict[str, Any]] = []
        self.reported = threading.Condition()
        self.contained = contained
        self.runner = ActionRunner(
            self._contain,
            lambda: {"PATH": os.environ["PATH"], "JOB_FLAG": "job", "SECRET": "hunter2"},
            tmp_path,
            self._report,
            lambda text: text.replace("hunter2", "***"),
        )

    def _contain(self, argv: Sequence[str]) -> list[str] | None:
        return list(argv) if self.contained else None

    def _report(self, data: dict[str, Any]) -> None:
        with self.reported:
            self.reports.append(data)
            self.reported.notify_all()

    def run(self, command: Command, count: int = 1) -> list[dict[str, Any]]:
        assert self.runner.take(command)
        with self.reported:
            assert self.reported.wait_for(lambda: len(self.reports) >= count, 60)
        return self.reports


def _action(action_id: str, *argv: str, timeout: float = 30.0, stdin: str = "") -> Command:
    return Command(
        kind="action",
        action_id=action_id,
        words=list(argv),
        stdin=stdin,
        variables={"TRAINOPS_RULE": "slow"},
        timeout_seconds=timeout,
    )


def test_it_runs_with_the_jobs_environment_and_the_finding(tmp_path: Path) -> None:
    code = (
        "import json, os, sys; print(json.dumps([dict(os.environ), sys.stdin.read(), "
        "os.getcwd(), sys.argv[1:]]))"
    )
    runner = Runner(tmp_path)
    command = _action("a1", sys.executable, "-c", code, "; rm -rf /", stdin='{"x": 1}')
    [report] = runner.run(command)
    assert (report["action_id"], report["ran"], report["exit_code"]) == ("a1", True, 0)
    env, stdin, cwd, args = json.loads(report["output"])
    env.pop("LC_CTYPE", None)  # the interpreter may set it for itself
    assert env == {
        "PATH": os.environ["PATH"],
        "JOB_FLAG": "job",
        "SECRET": "***",  # masked in the report, as in the job's log
        "TRAINOPS_RULE": "slow",
    }
    assert (stdin, cwd, args) == ('{"x": 1}', str(tmp_path), ["; rm -rf /"])  # no shell


def test_each_action_runs_once(tmp_path: Path) -> None:
    runner = Runner(tmp_path)
    count = tmp_path / "count"
    command = _action("a2", sys.executable, "-c", f"open({str(count)!r}, 'a').write('x')")
    [first] = runner.run(command)
    # Sent again (a restarted control plane lost the report): the same report, no second run.
    assert runner.runner.take(command)
    runner.runner.join(30)
    assert count.read_text() == "x" and runner.reports == [first, first]
    assert not runner.runner.take(Command(kind="stop"))  # not an action: left to others


def test_an_action_sent_again_while_it_runs_runs_once_and_reports_once(tmp_path: Path) -> None:
    runner = Runner(tmp_path)
    gate = tmp_path / "gate"
    code = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)"
    command = _action("a4", sys.executable, "-c", code)
    assert runner.runner.take(command)
    assert runner.runner.take(command)  # the next reply, while it runs: nothing more
    gate.touch()
    runner.runner.join(30)
    assert len(runner.reports) == 1 and runner.reports[0]["exit_code"] == 0


def test_a_declined_action_may_be_taken_once_the_script_runs(tmp_path: Path) -> None:
    runner = Runner(tmp_path, contained=False)
    command = _action("a5", sys.executable, "-c", "pass")
    [declined] = runner.run(command)
    assert declined["declined"] is True and declined["ran"] is False
    runner.contained = True
    ran = runner.run(command, count=2)[1]
    assert (ran["ran"], ran["exit_code"]) == (True, 0)


def test_a_command_is_killed_at_its_timeout_with_what_it_started(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); print('started', flush=True); "
        "time.sleep(300)"
    )
    [report] = Runner(tmp_path).run(_action("a3", sys.executable, "-c", code, timeout=2.0))
    assert (report["ran"], report["timed_out"], report["exit_code"]) == (True, True, None)
    assert report["output"].strip() == "started"
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 30  # SIGKILL is sent: wait for it to land
    while not _ended(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _ended(child)


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_only_the_tail_of_the_output_is_kept(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('a' * 1_000_000 + 'END')"
    [report] = Runner(tmp_path).run(_action("a4", sys.executable, "-c", code))
    assert report["exit_code"] == 0 and len(report["output"]) == OUTPUT_BYTES
    assert report["output"].endswith("aEND")


def test_failures_are_reported_never_raised(tmp_path: Path) -> None:
    runner = Runner(tmp_path)
    reports = runner.run(_action("b1", "/nonexistent/notify"))
    assert reports[0] == {
        "action_id": "b1",
        "ran": False,
        "error": "/nonexistent/notify: no such program",
    }
    runner.contained = False  # the host is not running its script
    reports = runner.run(_action("b2", sys.executable, "-c", "pass"), count=2)
    assert reports[1] == {
        "action_id": "b2",
        "ran": False,
        "declined": True,
        "error": "this host is not running the job's script",
    }
