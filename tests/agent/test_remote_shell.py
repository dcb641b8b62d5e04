"""The remote shell between a job's hosts, on real processes: ``rsh`` on one host, the agent's
relay and runner, the control plane's spawn table, and the keeper on the other host.

The agent API's HTTP hop is left out here (the end-to-end MPI test crosses it); the relay table
is the control plane's own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from trainops.agent._client import AgentApiError
from trainops.agent._remote import RemoteShell
from trainops.agent.launchers import remote_shell_paths
from trainops.agent.launchers.remote_shell import SOCKET_ENV, ShellSyntaxError, parse_command
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
        self.paths = remote_shell_paths(self.shell.directory)
        self.keeper: subprocess.Popen[str] | None = None
        self.tmp_path = tmp_path

    def start_keeper(self, *extra: str) -> subprocess.Popen[str]:
        self.close_keeper()  # one keeper a host; it ends once its command has
        self.keeper = subprocess.Popen(
            [*self.paths.keeper, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
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
