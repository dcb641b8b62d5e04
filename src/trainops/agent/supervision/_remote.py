"""The agent's side of the remote shell between a job's hosts (see ``launchers.remote_shell``).

On a job of more than one host, each agent opens a private directory with two Unix sockets:

- ``rsh.sock``, served by :class:`RemoteShellRelay`: the remote shell a launcher runs on this host
  (``remote_shell.py rsh algo-2 orted …``) connects here; the relay asks the control plane to run
  the words on the target host and answers with the outcome once the target reports it.
- ``keeper.sock``, served by the host's keeper process (started by the launcher on hosts that are
  reached this way): :class:`SpawnRunner` hands it each ``spawn`` command of the control plane and
  reports started and exited.

Both let in only the job's own processes (``remote_shell.check_caller``): a caller of this uid
(for ``rsh.sock``, a process below this agent) that gives the host's key, a secret of this host of this attempt made here and given to the
job's processes in their environment only. The directory is private (0700) to this uid. A
refused caller is named in the agent's log and nothing it asked for runs.

The agent's API calls for both go through a :class:`SpawnApi`; the agent's program gives it one
on HTTP, with a connection per thread.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from trainops._errors import TrainopsError
from trainops.agent.launchers import RemoteShellPaths, remote_shell_paths
from trainops.agent.launchers.remote_shell import check_caller, read_lines, send_line
from trainops.agent.reporting._client import AgentApiError, AgentClient
from trainops.agent.supervision._hostns import socket_parent
from trainops.protocol import Command, SpawnState

__all__ = ["HttpSpawnApi", "RemoteShell", "RemoteShellRelay", "SpawnApi", "SpawnRunner"]

_POLL_MAX_S = 0.5
REQUEST_TIMEOUT_S = 10.0


class SpawnApi(Protocol):
    """The control plane's spawn calls, for one host of one attempt."""

    def open_spawn(self, target: str, words: list[str]) -> dict[str, Any]: ...

    def spawn_status(self, spawn_id: str) -> dict[str, Any]: ...

    def report_spawn(
        self, spawn_id: str, state: str, exit_code: int | None = None, error: str | None = None
    ) -> None: ...


class HttpSpawnApi:
    """:class:`SpawnApi` over the agent API, with a keep-alive connection per thread."""

    def __init__(self, new_client: Callable[[], AgentClient], attempt: int) -> None:
        self._new_client = new_client
        self._attempt = attempt
        self._local = threading.local()

    def _client(self) -> AgentClient:
        client: AgentClient | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._new_client()
        return client

    def open_spawn(self, target: str, words: list[str]) -> dict[str, Any]:
        return self._client().open_spawn(self._attempt, target, words)

    def spawn_status(self, spawn_id: str) -> dict[str, Any]:
        return self._client().spawn_status(self._attempt, spawn_id)

    def report_spawn(
        self, spawn_id: str, state: str, exit_code: int | None = None, error: str | None = None
    ) -> None:
        self._client().report_spawn(self._attempt, spawn_id, state, exit_code, error)


class RemoteShell:
    """This host's end of the remote shell: the relay, the runner and their directory."""

    def __init__(self, api: SpawnApi, hosts: list[str], log: Callable[[str], None]) -> None:
        # Short and private (mkdtemp makes it 0700): a Unix socket's path has at most 107 bytes.
        # One parent for every job's directory, which other jobs' namespaces mask (_hostns).
        self.directory = Path(tempfile.mkdtemp(prefix="rsh-", dir=socket_parent()))
        self._key = secrets.token_urlsafe(32)
        self.relay = RemoteShellRelay(self.directory / "rsh.sock", api, hosts, log, self._key)
        self.runner = SpawnRunner(self.directory / "keeper.sock", api, log, self._key)

    def paths(self) -> RemoteShellPaths:
        """How the job's launcher reaches the other hosts from here (the key in its ``env``)."""
        return remote_shell_paths(self.directory, self._key)

    def start(self) -> RemoteShell:
        self.relay.start()
        return self

    def take(self, command: Command) -> None:
        self.runner.take(command)

    def close(self) -> None:
        self.relay.close()
        self.runner.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class RemoteShellRelay:
    """Serves the remote shell of this host's launcher: one request per connection."""

    def __init__(
        self, path: Path, api: SpawnApi, hosts: list[str], log: Callable[[str], None], key: str
    ) -> None:
        self.path = path
        self.api = api
        self.hosts = set(hosts)
        self.log = log
        self._key = key
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._closed = threading.Event()

    def start(self) -> None:
        self._listener.bind(str(self.path))
        self.path.chmod(0o600)
        self._listener.listen(64)
        threading.Thread(target=self._serve, name="trainops-rsh-relay", daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(
                target=self._handle, args=(conn,), name="trainops-rsh-request", daemon=True
            ).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(REQUEST_TIMEOUT_S)  # for the request; the wait is ours
                # Its callers are the job's launcher's children: processes below this agent.
                request = check_caller(conn, self._key, ancestor=os.getpid())
            except OSError as exc:  # a stranger (PermissionError) or a broken request
                self.log(f"Remote shell: {exc}; nothing was run")
                with contextlib.suppress(OSError):
                    send_line(conn, {"state": "failed", "error": str(exc)})
                return
            try:
                conn.settimeout(None)
                reply = self._relay(request)
            except (OSError, ValueError, KeyError, TypeError, TrainopsError) as exc:
                reply = {"state": "failed", "error": str(exc)}
            with contextlib.suppress(OSError):
                send_line(conn, reply)

    def _relay(self, request: dict[str, Any]) -> dict[str, Any]:
        host, words = request.get("host"), request.get("words")
        if not isinstance(host, str) or host not in self.hosts:
            known = ", ".join(sorted(self.hosts))
            raise ValueError(f"{host!r} is not a host of this job ({known})")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError("words must be a list of strings")
        self.log(f"Starting on {host}: {' '.join(words).strip()[:300]}")
        spawn = self.api.open_spawn(host, words)
        return self._await(str(spawn["spawn_id"]), spawn)

    def _await(self, spawn_id: str, status: dict[str, Any]) -> dict[str, Any]:
        delay = 0.02
        while status.get("state") not in (SpawnState.EXITED, SpawnState.FAILED):
            if self._closed.wait(delay):
                return {"state": "failed", "error": "this host's agent is closing"}
            delay = min(delay * 2, _POLL_MAX_S)
            try:
                status = self.api.spawn_status(spawn_id)
            except AgentApiError as exc:
                if not exc.retryable:  # the server restarted or is busy: ask again
                    raise
        return status


class SpawnRunner:
    """Hands the control plane's ``spawn`` commands to this host's keeper, each one once."""

    def __init__(self, keeper: Path, api: SpawnApi, log: Callable[[str], None], key: str) -> None:
        self.keeper = keeper
        self.api = api
        self.log = log
        self._key = key
        self._taken: set[str] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def take(self, command: Command) -> None:
        """Run a spawn command unless it is already under way; one whose keeper is not
        listening yet is left for the control plane to send again."""
        if command.kind != "spawn" or not command.spawn_id or not self.keeper.exists():
            return
        with self._lock:
            if command.spawn_id in self._taken:
                return
            self._taken.add(command.spawn_id)
        threading.Thread(
            target=self._run, args=(command,), name="trainops-spawn", daemon=True
        ).start()

    def close(self) -> None:
        self._closed.set()

    def _run(self, command: Command) -> None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                try:
                    conn.connect(str(self.keeper))
                except (ConnectionRefusedError, FileNotFoundError):
                    # The keeper is still starting (bound, not yet listening): not ours to
                    # fail; the control plane sends the command again.
                    with self._lock:
                        self._taken.discard(command.spawn_id)
                    return
                message = {"key": self._key, "spawn_id": command.spawn_id, "words": command.words}
                send_line(conn, message)
                ended = False
                for reply in read_lines(conn):
                    ended = self._report(command.spawn_id, reply)
                    if ended:
                        break
                if not ended:
                    self._report_failure(command.spawn_id, "the host's keeper went away")
        except OSError as exc:
            self._report_failure(command.spawn_id, f"cannot reach the host's keeper: {exc}")

    def _report(self, spawn_id: str, reply: dict[str, Any]) -> bool:
        """Pass the keeper's reply on; ``True`` once the spawn has ended."""
        state = reply.get("state")
        if state not in (SpawnState.STARTED, SpawnState.EXITED, SpawnState.FAILED):
            return False
        exit_code = reply.get("exit_code")
        error = reply.get("error")
        self._call(
            spawn_id,
            str(state),
            exit_code if isinstance(exit_code, int) else None,
            str(error) if error else None,
        )
        return bool(state != SpawnState.STARTED)

    def _report_failure(self, spawn_id: str, reason: str) -> None:
        self.log(f"Remote command {spawn_id} failed: {reason}")
        self._call(spawn_id, str(SpawnState.FAILED), None, reason)

    def _call(self, spawn_id: str, state: str, exit_code: int | None, error: str | None) -> None:
        """Report, retrying for a while: the asking host waits on this."""
        delay = 0.1
        for _ in range(20):
            try:
                self.api.report_spawn(spawn_id, state, exit_code, error)
                return
            except Exception as exc:
                failure = exc
            if self._closed.wait(delay):
                return
            delay = min(delay * 2, 2.0)
        self.log(f"Could not report remote command {spawn_id} as {state}: {failure}")
