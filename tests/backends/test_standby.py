"""The local backend's agent fork server: the standby handshake, one fork per launch, fallback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.backends.test_backend_conformance import _launch
from trainops._settings import Settings
from trainops.backends._local import LocalBackend, agent_process
from trainops.backends._standby import AgentForkServer
from trainops.protocol import LAUNCH_MARK, HostResources

# The real handshake of `python -m trainops.agent` in standby mode, then a visible effect.
ECHO_AGENT = [
    sys.executable,
    "-c",
    "import os, sys\n"
    "from trainops.agent.supervision._standby import serve_launches\n"
    "env = serve_launches()\n"
    "if env is None: sys.exit(0)\n"
    "print('launched', os.environ['TRAINOPS_AGENT_HOST'], os.getsid(0) == os.getpid(),\n"
    "      'TRAINOPS_AGENT_STANDBY' in os.environ, flush=True)\n",
]
# A fork server that never answers.
STUCK_AGENT = [sys.executable, "-c", "import time; time.sleep(120)"]


def _wait_gone(pid: int, timeout: float = 20) -> None:
    try:
        psutil.Process(pid).wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return


def _wait_for_text(path: Path, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().endswith("\n")):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return path.read_text()


def test_fork_server_forks_one_agent_per_launch(tmp_path: Path) -> None:
    forks = AgentForkServer(ECHO_AGENT, dict(os.environ))
    try:
        pids = []
        for host in ("algo-1", "algo-2"):
            pid = forks.launch({"TRAINOPS_AGENT_HOST": host}, tmp_path / f"{host}.out")
            assert pid is not None and pid != forks.pid
            pids.append(pid)
        assert len(set(pids)) == 2
        assert forks.alive()
        for host, pid in zip(("algo-1", "algo-2"), pids, strict=True):
            assert _wait_for_text(tmp_path / f"{host}.out") == f"launched {host} True False\n"
            _wait_gone(pid)
    finally:
        forks.retire()
    assert not forks.alive()


def test_fork_server_skips_a_malformed_launch(tmp_path: Path) -> None:
    forks = AgentForkServer(ECHO_AGENT, dict(os.environ))
    try:
        os.write(forks._requests, b'{"not": "a launch"}\n\n')  # bytes that carry no launch
        read_end, write_end = os.pipe()  # a launch that is not one the backend writes
        os.write(write_end, b'{"not": "a launch"}')
        os.close(write_end)
        socket.send_fds(forks._channel, [LAUNCH_MARK], [read_end])
        os.close(read_end)
        pid = forks.launch({"TRAINOPS_AGENT_HOST": "algo-3"}, tmp_path / "out")
        assert pid is not None
        assert _wait_for_text(tmp_path / "out") == "launched algo-3 True False\n"
    finally:
        forks.retire()


def test_retired_fork_server_exits_and_launches_nothing(tmp_path: Path) -> None:
    forks = AgentForkServer(ECHO_AGENT, dict(os.environ))
    forks.retire()
    assert not forks.alive()
    assert not psutil.pid_exists(forks.pid) or psutil.Process(forks.pid).status() == "zombie"
    assert forks.launch({"TRAINOPS_AGENT_HOST": "algo-1"}, tmp_path / "out") is None


def test_fork_server_that_never_answers_is_killed(tmp_path: Path) -> None:
    forks = AgentForkServer(STUCK_AGENT, dict(os.environ))
    try:
        assert forks.launch({"TRAINOPS_AGENT_HOST": "algo-1"}, tmp_path / "out", 0.5) is None
        assert not forks.alive()
        assert not psutil.pid_exists(forks.pid)
    finally:
        forks.retire()


def test_backend_launches_forked_agents(tmp_path: Path) -> None:
    backend = LocalBackend(Settings(home=tmp_path), agent_command=ECHO_AGENT, standby=True)
    backend.open()
    try:
        forks = backend._forks
        assert forks is not None
        for host in ("algo-1", "algo-2"):
            launch = _launch(tmp_path, host)
            handle = backend.launch(launch, HostResources(cpus=[0]), {})
            pid, created = agent_process(handle)
            assert pid is not None and pid != forks.pid and created is not None
            text = _wait_for_text(launch.state_dir / "agent.out")
            assert text.startswith(f"launched {host} True")
            _wait_gone(pid)
        assert backend._forks is forks and forks.alive()
    finally:
        backend.close()
    assert backend._forks is None and not forks.alive()


def test_dead_fork_server_falls_back_to_a_fresh_process(tmp_path: Path) -> None:
    backend = LocalBackend(Settings(home=tmp_path), agent_command=ECHO_AGENT, standby=True)
    backend.open()
    try:
        forks = backend._forks
        assert forks is not None
        os.kill(forks.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while forks.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        handle = backend.launch(_launch(tmp_path, "algo-2"), HostResources(cpus=[0]), {})
        pid, _ = agent_process(handle)
        assert pid is not None and pid != forks.pid
        _wait_gone(pid)
        assert backend._forks is not None and backend._forks is not forks
        assert backend._forks.alive()
    finally:
        backend.close()


@pytest.mark.parametrize("standby", [None, False])
def test_no_fork_server_for_custom_agents(tmp_path: Path, standby: bool | None) -> None:
    backend = LocalBackend(Settings(home=tmp_path), agent_command=ECHO_AGENT, standby=standby)
    backend.open()
    assert backend._forks is None
    backend.close()


# After the fork server's warm-up, an agent unpacking a job's source imports nothing more.
UNPACK_AFTER_WARM_UP = """
import sys
from pathlib import Path
from trainops.agent.__main__ import _warm_up
from trainops.archive import pack, safe_extract
work = Path(sys.argv[1])
(work / "src").mkdir()
(work / "src" / "train.py").write_text("print('hi')\\n")
archive = pack(work / "src", work / "sourcedir.tar.gz")
_warm_up()
before = set(sys.modules)
safe_extract(archive, work / "code")
assert (work / "code" / "train.py").read_text() == "print('hi')\\n"
print(sorted(set(sys.modules) - before))
"""


def test_fork_server_warm_up_leaves_unpacking_nothing_to_import(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", UNPACK_AFTER_WARM_UP, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
