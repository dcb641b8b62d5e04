"""The remote shell between a job's hosts, on real processes: ``rsh`` on one host, the agent's
relay and runner, the control plane's spawn table, and the keeper on the other host.

The agent API's HTTP hop is left out here (the end-to-end MPI test crosses it); the relay table
is the control plane's own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from trainops.agent.launchers.remote_shell import (
    KEY_ENV,
    SOCKET_ENV,
    ShellSyntaxError,
    parse_command,
    read_lines,
    send_line,
)
from trainops.agent.reporting._client import AgentApiError
from trainops.agent.supervision._remote import RemoteShell
from trainops.control._relay import SpawnRelay
from trainops.protocol import SpawnState

PY = sys.executable


class _RelayApi:
    """The agent's spawn calls answered by the control plane's relay table, in process."""

    def __init__(self, relay: SpawnRelay, host: str) -> None:
        self.relay, self.host = relay, host
        self.remote: RemoteShell | None = None  # the target host's end

    def open_spawn(self, target: str, words: list[str]) -> dict[str, Any]:
        spawn = self.relay.open("job", 1, self.host, target, words)
        assert self.remote is not None
        for command in self.relay.commands_for("job", 1, target):
            self.remote.take(command)
        return spawn.to_json()

    def spawn_status(self, spawn_id: str) -> dict[str, Any]:
        spawn = self.relay.get("job", 1, spawn_id)
        assert spawn is not None
        return spawn.to_json()

    def report_spawn(
        self, spawn_id: str, state: str, exit_code: int | None = None, error: str | None = None
    ) -> None:
        spawn = self.relay.get("job", 1, spawn_id)
        assert spawn is not None
        self.relay.update(spawn, SpawnState(state), exit_code, error)


class _Hosts:
    def __init__(self, tmp_path: Path) -> None:
        self.api = _RelayApi(SpawnRelay(), "algo-1")
        self.lines: list[str] = []
        self.shell = RemoteShell(self.api, ["algo-1", "algo-2"], self.lines.append).start()
        self.api.remote = self.shell  # one agent plays both hosts: same code on each side
        self.paths = self.shell.paths()
        self.keeper: subprocess.Popen[str] | None = None
        self.tmp_path = tmp_path

    def start_keeper(self, *extra: str) -> subprocess.Popen[str]:
        self.close_keeper()  # one keeper a host; it ends once its command has
        self.keeper = subprocess.Popen(
            [*self.paths.keeper, *extra],
            env={**os.environ, **self.paths.env},  # the key, as the job's launcher gives it
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        socket_path = Path(self.paths.keeper[-1])
        deadline = time.monotonic() + 10
        while not socket_path.exists():
            assert time.monotonic() < deadline and self.keeper.poll() is None
            time.sleep(0.02)
        return self.keeper

    def rsh(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.paths.agent, *args],
            env={**os.environ, **self.paths.env} if env is None else env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def close(self) -> None:
        self.close_keeper()
        self.shell.close()

    def close_keeper(self) -> None:
        if self.keeper is not None:
            if self.keeper.poll() is None:
                self.keeper.kill()
            self.keeper.wait()
            for stream in (self.keeper.stdout, self.keeper.stderr):
                if stream is not None:
                    stream.close()


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[_Hosts]:
    pair = _Hosts(tmp_path)
    yield pair
    pair.close()


def test_rsh_exits_with_the_remote_commands_status(hosts: _Hosts) -> None:
    hosts.start_keeper()
    done = hosts.rsh("algo-2", PY, "-c", "'import sys; sys.exit(3)'")
    assert done.returncode == 3, done.stderr
    assert any("Starting on algo-2" in line for line in hosts.lines)


def test_ssh_options_are_skipped_and_quotes_read_as_a_shell_would(hosts: _Hosts) -> None:
    out = hosts.tmp_path / "out"
    hosts.start_keeper()
    code = f"open({str(out)!r}, 'w').write(__import__('os').environ['GREETING'])"
    done = hosts.rsh(
        "-x",
        "-o",
        "BatchMode=yes",
        "algo-2",
        "GREETING='hi there' ;",
        "export",
        "GREETING",
        ";",
        PY,
        "-c",
        f'"{code}"',
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "hi there"


DAEMON = """
import os, sys, time
if os.fork():
    sys.exit(0)  # the parent returns at once, as orted --daemonize does
os.setsid()
while not os.path.exists(sys.argv[1]):  # until the test lets it end
    time.sleep(0.05)
open(sys.argv[2], "w").write(str(os.getpid()))
"""


def test_a_daemon_the_command_leaves_is_adopted_and_awaited(hosts: _Hosts) -> None:
    release, out = hosts.tmp_path / "release", hosts.tmp_path / "daemon-done"
    keeper = hosts.start_keeper()
    # The daemon runs until released: the remote shell answering at all shows it answered when
    # the first process ended, not when the daemon did.
    done = hosts.rsh("algo-2", PY, "-c", f"'{DAEMON}'", str(release), str(out))
    assert done.returncode == 0, done.stderr
    assert not out.exists() and keeper.poll() is None  # the keeper waits for the daemon
    [daemon] = psutil.Process(keeper.pid).children()
    assert daemon.is_running()
    release.touch()
    assert keeper.wait(timeout=60) == 0
    assert out.read_text() == str(daemon.pid)


def test_sigterm_reaches_the_daemons_the_keeper_adopted(hosts: _Hosts) -> None:
    keeper = hosts.start_keeper()
    sleeper = "import os, sys, time\nif os.fork(): sys.exit(0)\nos.setsid(); time.sleep(60)"
    assert hosts.rsh("algo-2", PY, "-c", f"'{sleeper}'").returncode == 0
    [daemon] = psutil.Process(keeper.pid).children()
    keeper.send_signal(signal.SIGTERM)
    keeper.wait(timeout=10)
    assert not daemon.is_running() or daemon.status() == psutil.STATUS_ZOMBIE


def test_what_cannot_run_is_reported_not_hidden(hosts: _Hosts) -> None:
    hosts.start_keeper()
    missing = hosts.rsh("algo-2", "/no/such/program")
    assert missing.returncode == 127 and "/no/such/program" in missing.stderr
    hosts.start_keeper()
    piped = hosts.rsh("algo-2", "cat", "/etc/hostname", "|", "wc")
    assert piped.returncode == 127 and "not supported" in piped.stderr
    stranger = hosts.rsh("algo-9", "true")
    assert stranger.returncode == 255 and "'algo-9' is not a host of this job" in stranger.stderr
    no_agent = hosts.rsh(
        "algo-2", "true", env={k: v for k, v in os.environ.items() if k != SOCKET_ENV}
    )
    assert no_agent.returncode == 255 and SOCKET_ENV in no_agent.stderr


def test_a_keeper_that_never_gets_a_command_gives_up_with_a_reason(hosts: _Hosts) -> None:
    keeper = hosts.start_keeper("--wait-first", "0.3")
    _, stderr = keeper.communicate(timeout=10)
    assert keeper.returncode == 1 and "no remote command came within 0.3 s" in stderr


def test_open_mpis_prefixed_command_line_is_read_as_a_shell_would() -> None:
    words = [
        " PATH=/usr/bin:$PATH ; export PATH ; LD_LIBRARY_PATH=/usr/lib:${LD_LIBRARY_PATH:-}",
        ";",
        "export",
        "LD_LIBRARY_PATH",
        ";",
        "/usr/bin/orted",
        "--daemonize",
        "-mca",
        "orte_hnp_uri",
        '"2893742080.0;tcp://127.0.0.1:48011"',
    ]
    command = parse_command(words, {"PATH": "/bin"})
    assert command.argv == [
        "/usr/bin/orted",
        "--daemonize",
        "-mca",
        "orte_hnp_uri",
        "2893742080.0;tcp://127.0.0.1:48011",
    ]
    assert command.env["PATH"] == "/usr/bin:/bin"
    assert command.env["LD_LIBRARY_PATH"] == "/usr/lib:"
    assert parse_command(["cd /tmp && X=${Y-d}e prog"], {}).cwd == "/tmp"
    assert parse_command(["X=${Y-d}e prog"], {}).env["X"] == "de"


@pytest.mark.parametrize(
    "line",
    [
        "a | b",
        "a > f",
        "a < f",
        "(a)",
        "a & b",
        "echo `id`",
        "echo $(id)",
        "",
        "X=1",
        "echo a ; echo b",
        "export 1X ; a",
        "'unclosed",
    ],
)
def test_shell_syntax_it_does_not_run_is_refused(line: str) -> None:
    with pytest.raises(ShellSyntaxError):
        parse_command([line], {})


def test_a_control_plane_that_refuses_the_command_is_a_clear_rsh_error(hosts: _Hosts) -> None:
    def refuse(target: str, words: list[str]) -> dict[str, Any]:
        raise AgentApiError(f"HTTP 409 host {target} of job 'j' has already ended", status=409)

    hosts.api.open_spawn = refuse  # type: ignore[method-assign]
    done = hosts.rsh("algo-2", "true")
    assert done.returncode == 255 and "has already ended" in done.stderr


# --- who may use the sockets ---------------------------------------------------------------------


def _ask(path: Path, message: dict[str, Any]) -> dict[str, Any] | None:
    """One request on a socket, as any process on the machine could send it; the reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(path))
        send_line(conn, message)
        return next(read_lines(conn), None)


def _marker_command(marker: Path) -> list[str]:
    return [PY, "-c", f'\'open("{marker}", "w").close()\'']


@pytest.mark.parametrize("key", [None, "", "wrong", "another job's key"])
def test_rsh_without_the_hosts_key_is_refused_and_nothing_runs(
    hosts: _Hosts, key: str | None
) -> None:
    marker = hosts.tmp_path / "ran"
    hosts.start_keeper()
    env = {**os.environ, **hosts.paths.env}
    if key == "another job's key":
        other = RemoteShell(hosts.api, ["algo-1", "algo-2"], hosts.lines.append)
        env[KEY_ENV] = other.paths().env[KEY_ENV]
        other.close()
    elif key is None:
        del env[KEY_ENV]
    else:
        env[KEY_ENV] = key
    done = hosts.rsh("algo-2", *_marker_command(marker), env=env)
    assert done.returncode == 255
    assert "not set" in done.stderr if not key else "remote-shell key" in done.stderr
    direct = _ask(Path(env[SOCKET_ENV]), {"host": "algo-2", "words": _marker_command(marker)})
    assert direct is not None and direct["state"] == "failed" and "key" in direct["error"]
    assert not any(line.startswith("Starting on") for line in hosts.lines)
    assert hosts.keeper is not None and hosts.keeper.poll() is None  # it was never handed one
    assert not marker.exists()
    assert hosts.paths.env[KEY_ENV] not in "\n".join(hosts.lines)  # the key is never logged


def test_the_keeper_runs_nothing_for_a_caller_without_the_key(hosts: _Hosts) -> None:
    marker = hosts.tmp_path / "ran"
    keeper = hosts.start_keeper("--wait-first", "30")
    socket_path = Path(hosts.paths.keeper[-1])
    for key in (None, "wrong"):
        message = {"spawn_id": "x", "words": _marker_command(marker)}
        reply = _ask(socket_path, message if key is None else message | {"key": key})
        assert reply is not None and reply["state"] == "failed" and "key" in reply["error"]
    assert keeper.poll() is None and not marker.exists()
    # and its own agent's spawn still runs
    assert hosts.rsh("algo-2", *_marker_command(marker)).returncode == 0
    assert marker.exists()


def test_a_keeper_started_without_a_key_refuses_to_serve(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    module = sys.modules["trainops.agent.launchers.remote_shell"].__file__
    assert module is not None
    done = subprocess.run(
        [PY, module, "keeper", "--socket", str(tmp_path / "k.sock")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1 and KEY_ENV in done.stderr
    assert not (tmp_path / "k.sock").exists()


def _as_nobody() -> None:
    os.setgid(65534)
    os.setuid(65534)


SYSTEM_PY = "/usr/bin/python3"  # the test's own may sit where another uid cannot run it


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a caller as another uid")
@pytest.mark.skipif(not os.path.exists(SYSTEM_PY), reason=f"needs {SYSTEM_PY} for that caller")
def test_another_uid_cannot_reach_the_socket_nor_use_it_with_the_key(hosts: _Hosts) -> None:
    marker = hosts.tmp_path / "ran"
    assert hosts.shell.directory.stat().st_mode & 0o777 == 0o700
    code = (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.connect(sys.argv[1])\n"
        "try:\n"
        "    s.sendall(json.dumps(json.loads(sys.argv[2])).encode() + b'\\n')\n"
        "except BrokenPipeError:\n"
        "    pass  # refused before its request was read\n"
        "print(s.recv(65536).decode())\n"
    )
    request = json.dumps(
        {"key": hosts.paths.env[KEY_ENV], "host": "algo-2", "words": _marker_command(marker)}
    )
    socket_path = hosts.paths.env[SOCKET_ENV]

    def as_nobody() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SYSTEM_PY, "-c", code, socket_path, request],
            cwd="/",
            preexec_fn=_as_nobody,  # a test's child, before it runs any thread
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    denied = as_nobody()  # the private directory keeps it out
    assert denied.returncode != 0 and "PermissionError" in denied.stderr
    # opened up by mistake (its directory and the parent every job's directory shares): the
    # uid check still holds
    parent = hosts.shell.directory.parent
    parent_mode = parent.stat().st_mode & 0o777
    hosts.shell.directory.chmod(0o755)
    Path(socket_path).chmod(0o777)
    parent.chmod(0o755)
    try:
        refused = as_nobody()
    finally:
        parent.chmod(parent_mode)
    assert refused.returncode == 0 and "runs as uid 65534" in refused.stdout
    assert not marker.exists()


ORPHAN = """
import json, os, socket, sys, time
parent = os.getpid()
if os.fork():
    os._exit(0)  # the grandchild is left to init: no longer below whoever started us
while os.getppid() == parent:
    time.sleep(0.01)
with socket.socket(socket.AF_UNIX) as conn:
    conn.connect(sys.argv[1])
    try:
        conn.sendall(sys.argv[2].encode() + b"\\n")
    except BrokenPipeError:
        pass  # refused before its request was read
    reply = conn.recv(65536).decode()
out = sys.argv[3]
with open(out + ".tmp", "w") as f:
    json.dump({"ppid": os.getppid(), "reply": reply}, f)
os.rename(out + ".tmp", out)
"""


def test_a_caller_with_the_key_that_is_not_below_the_agent_is_refused(hosts: _Hosts) -> None:
    marker, out = hosts.tmp_path / "ran", hosts.tmp_path / "orphan.json"
    hosts.start_keeper()
    request = {"key": hosts.paths.env[KEY_ENV], "host": "algo-2", "words": ["touch", str(marker)]}
    socket_path = hosts.paths.env[SOCKET_ENV]
    with (hosts.tmp_path / "orphan.err").open("w") as err:
        subprocess.run(
            [PY, "-c", ORPHAN, socket_path, json.dumps(request), str(out)],
            stderr=err,
            check=True,
            timeout=30,
        )
    deadline = time.monotonic() + 30
    while not out.exists():
        assert time.monotonic() < deadline, (hosts.tmp_path / "orphan.err").read_text()
        time.sleep(0.02)
    found = json.loads(out.read_text())
    assert found["ppid"] != os.getpid()  # it really is outside this process's tree
    assert "is not a process of this host's job" in found["reply"]
    assert not marker.exists() and not any("Starting on" in line for line in hosts.lines)
    assert hosts.rsh("algo-2", "touch", str(marker)).returncode == 0  # the job's own still runs
    assert marker.exists()
