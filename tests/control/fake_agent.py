"""A stand-in host agent for control-plane tests: a real process speaking the agent API over HTTP.

It runs no script. Its behaviour comes from the job's ``environment`` (in the assignment):

- ``FAKE_LINES`` (default 3) log lines, ``FAKE_LINE_DELAY`` seconds apart; each line ``i`` also
  reports metrics ``step = i`` and ``loss = 1 / (i + 1)``;
- ``FAKE_FAIL_HOST`` + ``FAKE_FAIL_REASON``: that host exits Failed with that reason after its
  lines (before any hang);
- ``FAKE_FAILED_EARLIER_HOST`` + ``FAKE_FAILED_EARLIER_REASON``: that host stays in Training
  until told to stop, then exits Failed with that reason and a ``failed_at`` an hour before it
  started (a rank that failed first, on a host slow to end); with ``FAKE_READY_FILE``, it
  makes that file once it is in Training, and the ``FAKE_FAIL_HOST`` fails only once it exists;
- ``FAKE_HANG_ATTEMPTS`` ("1,2"): in these attempts, stay in Training until told to stop (with
  ``FAKE_READY_FILE``, a hanging host makes that file once it is in Training, so that a
  ``FAKE_FAIL_HOST`` fails only after its sibling is up);
- ``FAKE_IGNORE_STOP`` ("1"): never obey a stop (the control plane must kill the agent);
- ``FAKE_SILENT_ATTEMPTS``: in these attempts, stop reporting after the lines and stay alive
  (a hung or cut-off agent: the control plane must notice the missing heartbeats);
- ``FAKE_CRASH_ATTEMPTS``: in these attempts, die with ``os._exit`` after the lines;
- ``FAKE_INTERNAL_ATTEMPTS``: in these attempts, report an ``InternalError`` exit;
- ``FAKE_PARTS`` ("1"): upload model and output parts (multi-host) under the output prefix, as
  the real agent does whichever way its host ends (completed, failed or stopped).

Like the real agent it journals every event before sending it, resends everything above the
acknowledged number, and re-reads ``server.json`` when the server cannot be reached.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import httpx

from trainops.protocol import (
    AgentEvent,
    AgentLaunch,
    Assignment,
    Command,
    EventKind,
    EventReply,
    record_agent_process,
)

FLUSH_DEADLINE_S = 120.0


class FakeAgent:
    def __init__(self, launch: AgentLaunch) -> None:
        self.launch = launch
        self.url = launch.server_url
        self.events: list[AgentEvent] = []
        self.acked = 0
        self.stop_reason: str | None = None
        self.actions: set[str] = set()
        self.action_mode = "report"  # FAKE_ACTION of the job's environment (see take_action)
        self.journal = (launch.state_dir / "journal.jsonl").open("a", encoding="utf-8")
        self.http = httpx.Client(timeout=5.0, headers={"Authorization": f"Bearer {launch.token}"})

    def base(self) -> str:
        return f"{self.url}/agent/v1/jobs/{self.launch.job_name}/hosts/{self.launch.host}"

    def fetch_assignment(self) -> Assignment:
        deadline = time.monotonic() + FLUSH_DEADLINE_S
        while True:
            try:
                response = self.http.get(
                    f"{self.base()}/assignment", params={"attempt": self.launch.attempt}
                )
                response.raise_for_status()
                return Assignment.from_json(response.json())
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                self.rediscover()
                time.sleep(0.05)

    def emit(self, kind: EventKind, **data: Any) -> None:
        event = AgentEvent(seq=len(self.events) + 1, ts=time.time(), kind=kind, data=data)
        self.journal.write(json.dumps(event.to_json()) + "\n")
        self.journal.flush()
        self.events.append(event)

    def post(self) -> None:
        pending = [e.to_json() for e in self.events if e.seq > self.acked]
        body = {"attempt": self.launch.attempt, "events": pending}
        try:
            response = self.http.post(f"{self.base()}/events", json=body)
            response.raise_for_status()
        except httpx.HTTPError:
            self.rediscover()
            return
        reply = EventReply.from_json(response.json())
        self.acked = max(self.acked, reply.acked_seq)
        for command in reply.commands:
            if command.kind == "stop" and self.stop_reason is None:
                self.stop_reason = command.reason or "stop"
                if command.interrupted:  # a spot interruption: its notice is the grace
                    self.stop_reason += f" (interrupted, {command.grace_seconds:g} s notice)"
            if command.kind == "action":
                self.take_action(command)

    def take_action(self, command: Command) -> None:
        """A rule's command action, answered as ``FAKE_ACTION`` says: ``report`` (ran, exit 0),
        ``decline`` (not running a script) or ``silent`` (taken, never reported)."""
        if command.action_id in self.actions:
            return
        self.actions.add(command.action_id)
        if self.action_mode == "report":
            output = f"ran {' '.join(command.words)} with {command.variables}"
            self.emit(
                EventKind.ACTION, action_id=command.action_id, ran=True, exit_code=0, output=output
            )
        elif self.action_mode == "decline":
            self.emit(EventKind.ACTION, action_id=command.action_id, ran=False, declined=True)

    def rediscover(self) -> None:
        server_file = Path(os.environ["TRAINOPS_HOME"]) / "server.json"
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.url = json.loads(server_file.read_text())["url"]

    def flush(self) -> None:
        deadline = time.monotonic() + FLUSH_DEADLINE_S
        while self.acked < len(self.events) and time.monotonic() < deadline:
            self.post()
            if self.acked < len(self.events):
                time.sleep(0.05)

    def wait_for_stop(self, ignore: bool) -> None:
        while self.stop_reason is None or ignore:
            self.post()
            time.sleep(0.1)

    def finish(
        self, outcome: str, exit_code: int | None, reason: str | None = None, **more: Any
    ) -> None:
        self.emit(
            EventKind.EXIT, outcome=outcome, exit_code=exit_code, failure_reason=reason, **more
        )
        self.flush()


def wait_for_file(path: str | None) -> None:
    deadline = time.monotonic() + FLUSH_DEADLINE_S
    while path and not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def attempts(env: dict[str, str], key: str) -> set[int]:
    return {int(a) for a in env.get(key, "").split(",") if a.strip()}


def write_part(assignment: Assignment, folder: str) -> str:
    root = assignment.output_prefix.removeprefix("file://")
    target = Path(root) / "output" / folder / f"{assignment.current_host}.tar.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        for name, text in (
            ("shared.txt", assignment.current_host),
            (f"{assignment.current_host}.txt", "x"),
        ):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return target.as_uri()


def _loss_scale(hyperparameters: dict[str, Any], env: dict[str, str]) -> float:
    """1, or with ``FAKE_LOSS_BY_LR=1`` a loss that depends on the tuned ``lr`` and
    ``optimizer`` (best near lr=0.01 with adam), so a tuning job's charts have a shape."""
    if env.get("FAKE_LOSS_BY_LR") != "1":
        return 1.0
    try:
        lr = float(hyperparameters.get("lr", 0.01))
    except (TypeError, ValueError):
        lr = 0.01
    sgd = 0.3 if str(hyperparameters.get("optimizer")) == "sgd" else 0.0
    return 1.0 + (math.log10(max(lr, 1e-12)) + 2.0) ** 2 + sgd


def run(agent: FakeAgent) -> int:
    assignment = agent.fetch_assignment()
    env = assignment.spec.environment
    host, attempt = assignment.current_host, assignment.attempt
    agent.action_mode = env.get("FAKE_ACTION", "report")
    agent.emit(EventKind.PHASE, phase="Downloading", message="")
    agent.post()
    agent.emit(EventKind.PHASE, phase="Training", message="")
    agent.emit(EventKind.PROCESS, pid=os.getpid(), pgid=os.getpgrp(), command=["fake"])
    for i in range(int(env.get("FAKE_LINES", "3"))):
        agent.emit(EventKind.LOG, stream="stdout", line=f"{host} line {i}")
        agent.emit(EventKind.METRIC, name="step", value=float(i), timestamp=time.time())
        loss = _loss_scale(assignment.spec.hyperparameters, env) / (i + 1)
        agent.emit(EventKind.METRIC, name="loss", value=loss, timestamp=time.time())
        agent.post()
        if agent.stop_reason is not None:
            break
        time.sleep(float(env.get("FAKE_LINE_DELAY", "0")))
    if env.get("FAKE_FAIL_HOST") == host:
        wait_for_file(env.get("FAKE_READY_FILE"))
        upload_parts(agent, assignment)
        agent.finish("Failed", 1, env.get("FAKE_FAIL_REASON", "it failed"))
        return 0
    if env.get("FAKE_FAILED_EARLIER_HOST") == host:
        started = time.time()
        if ready := env.get("FAKE_READY_FILE"):
            Path(ready).touch()
        agent.wait_for_stop(ignore=False)
        reason = env.get("FAKE_FAILED_EARLIER_REASON", "it failed first")
        agent.finish("Failed", 1, reason, failed_at=started - 3600)
        return 0
    if attempt in attempts(env, "FAKE_SILENT_ATTEMPTS"):
        while True:  # no more reports, ever; only a kill ends this
            time.sleep(60)
    if attempt in attempts(env, "FAKE_HANG_ATTEMPTS"):
        if ready := env.get("FAKE_READY_FILE"):
            Path(ready).touch()
        agent.wait_for_stop(ignore=env.get("FAKE_IGNORE_STOP") == "1")
    if agent.stop_reason is not None:
        agent.emit(EventKind.LOG, stream="agent", line=f"stopping: {agent.stop_reason}")
        upload_parts(agent, assignment)
        agent.finish("Stopped", -15)
        return 0
    if attempt in attempts(env, "FAKE_CRASH_ATTEMPTS"):
        agent.flush()
        os._exit(3)
    if attempt in attempts(env, "FAKE_INTERNAL_ATTEMPTS"):
        agent.finish("InternalError", None, "agent broke down")
        return 0
    agent.emit(EventKind.PHASE, phase="Uploading", message="")
    upload_parts(agent, assignment)
    agent.emit(EventKind.ARTIFACT, name="log", uri=f"{assignment.output_prefix}/logs/{host}.log")
    agent.finish("Completed", 0)
    return 0


def upload_parts(agent: FakeAgent, assignment: Assignment) -> None:
    if assignment.spec.environment.get("FAKE_PARTS") == "1":
        agent.emit(EventKind.ARTIFACT, name="model_part", uri=write_part(assignment, "model-parts"))
        agent.emit(
            EventKind.ARTIFACT, name="output_part", uri=write_part(assignment, "output-parts")
        )


def obey_sigterm(agent: FakeAgent) -> None:
    """SIGTERM is a stop, as for the real agent (it is ignored too when told to ignore stops)."""

    def stop(_signum: int, _frame: object) -> None:
        if agent.stop_reason is None:
            agent.stop_reason = "SIGTERM"

    signal.signal(signal.SIGTERM, stop)


if __name__ == "__main__":
    launched = AgentLaunch.from_env(dict(os.environ))
    record_agent_process(launched.state_dir)  # as the real agent does
    fake = FakeAgent(launched)
    obey_sigterm(fake)
    sys.exit(run(fake))
