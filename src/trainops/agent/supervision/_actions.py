"""A rule's command action, run on this host as the job's own processes run.

The control plane sends a ``Command(kind="action")`` in a report reply (see
``trainops.control._host_actions``); :class:`ActionRunner` runs each ``action_id`` once, on a
thread of its own: its argv (never a shell) joined into the host's namespaces (``contain``: the
same ``_hostns_exec --join`` as the script's ranks, or ``None`` when the host is not running
its script), with the job's environment (the script's) and the action's variables, in the
script's working directory, the finding as JSON on standard input. It is killed, with its
whole session, at its timeout; only the tail of its output is kept (read as it comes, never
held whole), masked as the job's log is. How it went is reported as an ``action`` event; an
``action_id`` sent again once it has run (a restarted control plane lost the report) gets that
report again, never a second run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainops.protocol import Command

__all__ = ["OUTPUT_BYTES", "ActionRunner"]

OUTPUT_BYTES = 4096  # the tail of a command's output that is kept
_MAX_TIMEOUT_S = 3600.0
_READ = 65536


class ActionRunner:
    """Runs the control plane's ``action`` commands of this host, each ``action_id`` once.

    ``contain(argv)`` is the argv that runs ``argv`` as the job's processes run, or ``None``
    when it cannot be run now (no script running); ``environment()`` the job's environment;
    ``report(data)`` sends the ``action`` event; ``mask(text)`` hides the job's secrets."""

    def __init__(
        self,
        contain: Callable[[Sequence[str]], list[str] | None],
        environment: Callable[[], Mapping[str, str]],
        cwd: Path,
        report: Callable[[dict[str, Any]], object],
        mask: Callable[[str], str],
    ) -> None:
        self._contain = contain
        self._environment = environment
        self._cwd = cwd
        self._report = report
        self._mask = mask
        self._taken: set[str] = set()
        self._reported: dict[str, dict[str, Any]] = {}  # action id -> what its run reported
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def take(self, command: Command) -> bool:
        """Run ``command`` if it is an action not taken yet; whether it was an action."""
        if command.kind != "action":
            return False
        with self._lock:
            taken = not command.action_id or command.action_id in self._taken
            again = self._reported.get(command.action_id) if taken else None
            if not taken:
                self._taken.add(command.action_id)
        if taken:
            if again is not None:  # asked again after it ran: the report was lost (a restart)
                self._report(again)
            return True
        thread = threading.Thread(
            target=self._run, args=(command,), name="trainops-action", daemon=True
        )
        self._threads.append(thread)
        thread.start()
        return True

    def join(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s each) for the actions under way to be reported."""
        for thread in self._threads:
            thread.join(timeout)

    def _run(self, command: Command) -> None:
        data: dict[str, Any] = {"action_id": command.action_id, "ran": False}
        try:
            data |= self._execute(command)
        except Exception as exc:  # a command's failure is its report, never the agent's
            data["error"] = f"{type(exc).__name__}: {exc}"
        if data.get("error"):
            data["error"] = self._mask(str(data["error"]))[:1000]
        with self._lock:
            if data.get("declined") is True:  # nothing ran: it may be taken when it can run
                self._taken.discard(command.action_id)
            else:
                self._reported[command.action_id] = data
        self._report(data)

    def _execute(self, command: Command) -> dict[str, Any]:
        argv = [str(word) for word in command.words]
        if not argv:
            return {"error": "no command"}
        contained = self._contain(argv)
        if contained is None:
            return {"declined": True, "error": "this host is not running the job's script"}
        env = {**self._environment(), **{str(k): str(v) for k, v in command.variables.items()}}
        timeout = min(max(float(command.timeout_seconds), 0.1), _MAX_TIMEOUT_S)
        try:
            process = subprocess.Popen(
                contained,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self._cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            return {"error": f"{argv[0]}: no such program"}
        return self._supervise(process, command.stdin.encode(), timeout)

    def _supervise(
        self, process: subprocess.Popen[bytes], stdin: bytes, timeout: float
    ) -> dict[str, Any]:
        tail = bytearray()
        feeder = threading.Thread(target=_feed, args=(process, stdin), daemon=True)
        reader = threading.Thread(target=_keep_tail, args=(process, tail), daemon=True)
        feeder.start()
        reader.start()
        timed_out = False
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # what it left in its session goes too
            process.wait()
        reader.join(1.0)  # a child that left the session may hold the pipe: not waited on
        output = bytes(tail).decode("utf-8", "replace")
        return {
            "ran": True,
            "exit_code": None if timed_out else process.returncode,
            "timed_out": timed_out,
            "output": self._mask(output)[-OUTPUT_BYTES:],
        }


def _feed(process: subprocess.Popen[bytes], data: bytes) -> None:
    assert process.stdin is not None
    with contextlib.suppress(OSError), process.stdin:
        process.stdin.write(data)


def _keep_tail(process: subprocess.Popen[bytes], tail: bytearray) -> None:
    assert process.stdout is not None
    with contextlib.suppress(OSError, ValueError), process.stdout:
        while chunk := os.read(process.stdout.fileno(), _READ):
            tail += chunk
            del tail[:-OUTPUT_BYTES]
