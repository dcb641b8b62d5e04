"""Test doubles and builders for the agent tests: a recording reporter, a tiny agent-API server,
and a job builder that packs a real source archive into a real ``file://`` store."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from trainops.agent import HostAgent, HostResult
from trainops.archive import pack
from trainops.protocol import (
    AgentEvent,
    Assignment,
    Command,
    EventKind,
    HostResources,
    event_span,
)
from trainops.spec import JobSpec


class RecordingReporter:
    """A :class:`trainops.agent.Reporter` that keeps every event in memory."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        self._pending: list[Command] = []
        self._lock = threading.Lock()
        self.closed = False
        self.disowned: str | None = None  # set it to play a control plane that revoked the host

    def emit(self, kind: EventKind, data: dict[str, Any]) -> AgentEvent:
        with self._lock:
            event = AgentEvent(seq=len(self.events) + 1, ts=time.time(), kind=kind, data=data)
            self.events.append(event)
        return event

    def commands(self) -> list[Command]:
        with self._lock:
            taken, self._pending = self._pending, []
        return taken

    def close(self, timeout: float = 30.0) -> bool:
        self.closed = True
        return True

    def push(self, command: Command) -> None:
        with self._lock:
            self._pending.append(command)

    def of(self, kind: EventKind) -> list[dict[str, Any]]:
        with self._lock:
            return [e.data for e in self.events if e.kind is kind]

    def lines(self, stream: str | None = None) -> list[str]:
        logs = self.of(EventKind.LOG)
        return [
            line
            for d in logs
            if stream is None or d["stream"] == stream
            for line in (d["lines"] if "lines" in d else [d["line"]])
        ]

    def points(self) -> list[tuple[str, float]]:
        """``(name, value)`` of every metric point, whether sent alone or in a batch."""
        return [
            (str(d["name"]), float(value))
            for d in self.of(EventKind.METRIC)
            for value in (d["values"] if "values" in d else [d["value"]])
        ]

    def phases(self) -> list[str]:
        return [d["phase"] for d in self.of(EventKind.PHASE)]

    def artifacts(self) -> dict[str, str]:
        return {d["name"]: d["uri"] for d in self.of(EventKind.ARTIFACT)}

    def wait_for_line(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines()):
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line with {text!r}: {self.lines()}")
            time.sleep(0.02)


@dataclass
class JobFixture:
    """A job ready to run on one host: its assignment and the dirs the agent works in."""

    assignment: Assignment
    root: Path
    state_dir: Path
    objects: Path
    reporter: RecordingReporter = field(default_factory=RecordingReporter)

    def agent(self, environ: dict[str, str] | None = None, **kwargs: Any) -> HostAgent:
        env = dict(os.environ if environ is None else environ)
        return HostAgent(
            self.assignment,
            root=self.root,
            state_dir=self.state_dir,
            reporter=self.reporter,
            environ=env,
            sync_interval=0.1,
            **kwargs,
        )

    def run(self, environ: dict[str, str] | None = None) -> HostResult:
        return self.agent(environ).run()

    def object_path(self, uri: str) -> Path:
        assert uri.startswith("file://")
        return Path(uri[len("file://") :])


def make_job(
    tmp_path: Path,
    files: dict[str, str | bytes],
    *,
    host: str = "algo-1",
    hosts: list[str] | None = None,
    resources: HostResources | None = None,
    attempt: int = 1,
    archive: Path | None = None,
    output_prefix: str | None = None,
    **spec: Any,
) -> JobFixture:
    """Pack ``files`` as sourcedir.tar.gz into a file:// store and build the assignment."""
    objects = tmp_path / "objects"
    code_uri = _upload_source(tmp_path, objects, files) if archive is None else archive.as_uri()
    spec.setdefault("entry_point", "train.py")
    job = JobSpec(**spec).view()
    name = spec.get("job_name") or "job-1"
    assignment = Assignment(
        job_name=name,
        attempt=attempt,
        current_host=host,
        hosts=hosts or [host],
        spec=job,
        code_uri=code_uri,
        output_prefix=output_prefix or (objects / "jobs" / name).as_uri(),
        resources=resources or HostResources(),
    )
    root = tmp_path / "hosts" / host / "root"
    state = tmp_path / "hosts" / host / "state"
    return JobFixture(assignment, root, state, objects)


def _upload_source(tmp_path: Path, objects: Path, files: dict[str, str | bytes]) -> str:
    source = tmp_path / "source"
    for rel, content in files.items():
        path = source / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    source.mkdir(exist_ok=True)
    archive = pack(source, objects / "code" / "sourcedir.tar.gz")
    return archive.as_uri()


class RecordingAgentApi:
    """A real HTTP server on 127.0.0.1 that speaks the agent API like the control plane:
    it serves one assignment, stores each ``(attempt, seq)`` once and replies with the acked
    sequence number and any queued commands. ``drop_replies`` event posts are stored but their
    connection is closed without a reply, as when a server dies mid-request. While ``full`` is
    set, event posts are answered 507 (a control plane whose store's disk is full) and nothing
    is stored."""

    def __init__(self, assignment: Assignment | None, token: str, *, drop_replies: int = 0) -> None:
        self.assignment = assignment
        self.token = token
        self.drop_replies = drop_replies
        self.stored: dict[int, dict[str, Any]] = {}
        self.covered: set[int] = set()  # sequence numbers stored (an event may span several)
        self.received_seqs: list[int] = []
        self.posts = 0
        self.full = False
        self.refused = 0  # posts answered 507
        self.arrived_in: dict[int, int] = {}  # sequence number: the post that first brought it
        self.commands: list[Command] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RecordingAgentApi:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def acked(self) -> int:
        seq = 0
        while seq + 1 in self.covered:
            seq += 1
        return seq

    def log_lines(self) -> list[str]:
        """Every log line stored, in order, whether it came alone or in a batch."""
        return [
            str(line)
            for e in self.events(EventKind.LOG)
            for line in (e["data"]["lines"] if "lines" in e["data"] else [e["data"]["line"]])
        ]

    def post_of(self, text: str) -> int:
        """The number of the post that first brought a log line containing ``text``."""
        for event in self.events(EventKind.LOG):
            data = event["data"]
            if any(text in line for line in data.get("lines", [data.get("line", "")])):
                return self.arrived_in[event["seq"]]
        raise AssertionError(f"no log line with {text!r} arrived")

    def events(self, kind: EventKind | None = None) -> list[dict[str, Any]]:
        with self.lock:
            found = [self.stored[s] for s in sorted(self.stored)]
        return [e for e in found if kind is None or e["kind"] == str(kind)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("the recording agent API did not see what it waited for")
            time.sleep(0.02)

    def handle_events(self, body: dict[str, Any]) -> dict[str, Any] | None:
        with self.lock:
            self.posts += 1
            for raw in body["events"]:
                self.received_seqs.append(raw["seq"])
                self.stored.setdefault(raw["seq"], raw)
                self.arrived_in.setdefault(raw["seq"], self.posts)
                span = event_span(raw["kind"], raw["data"])
                self.covered.update(range(raw["seq"], raw["seq"] + span))
            if body["events"] and self.drop_replies > 0:
                self.drop_replies -= 1
                return None
            commands, self.commands = self.commands, []
            return {"acked_seq": self.acked(), "commands": [c.to_json() for c in commands]}


def _handler(api: RecordingAgentApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            if not self._authorized():
                return
            if api.assignment is None or "/assignment" not in self.path:
                self._reply(404, {"detail": "no assignment"})
                return
            self._reply(200, api.assignment.to_json())

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            if not self._authorized():
                return
            if api.full:
                with api.lock:
                    api.refused += 1
                self._reply(507, {"detail": {"error": "insufficient_storage"}})
                return
            reply = api.handle_events(body)
            if reply is None:
                self.close_connection = True
                return
            self._reply(200, reply)

        def _authorized(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {api.token}":
                return True
            self._reply(401, {"detail": "bad token"})
            return False

        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def make_hosts(
    tmp_path: Path, files: dict[str, str | bytes], count: int = 2, **spec: Any
) -> list[JobFixture]:
    """One job of ``count`` hosts (``algo-1``…), each host's fixture in a folder of its own; as
    the control plane assigns them, they share the job's source and output prefix (the hosts
    derive their loopback addresses and rendezvous port from them, see ``rendezvous_scope``)."""
    hosts = [f"algo-{i}" for i in range(1, count + 1)]
    objects = tmp_path / "objects"
    archive = Path(urllib.parse.urlparse(_upload_source(tmp_path, objects, files)).path)
    name = spec.get("job_name") or "job-1"
    prefix = (objects / "jobs" / name).as_uri()
    return [
        make_job(
            tmp_path / host,
            files,
            hosts=hosts,
            host=host,
            instance_count=count,
            archive=archive,
            output_prefix=prefix,
            **spec,
        )
        for host in hosts
    ]


def run_together(jobs: list[JobFixture]) -> list[HostResult]:
    """Run the hosts of one job at the same time, each agent in a thread; results in order."""
    results: dict[int, HostResult] = {}

    def run(index: int) -> None:
        results[index] = jobs[index].run()

    runners = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    return [results[i] for i in range(len(jobs))]
