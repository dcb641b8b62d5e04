"""The local backend's warm spare: the agent's standby handshake, hand-over, refill, fallback."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.backends.test_backend_conformance import _launch
from trainops._settings import Settings
from trainops.backends._local import LocalBackend
from trainops.backends._standby import StandbyAgent
from trainops.protocol import HostResources

# The real handshake of `python -m trainops.agent` in standby mode, then a visible effect.
ECHO_AGENT = [
    sys.executable,
    "-c",
    "import os, sys\n"
    "from trainops.agent._standby import await_launch\n"
    "env = await_launch(sys.stdin.buffer)\n"
    "if env is None: sys.exit(0)\n"
    "print('launched', os.environ['TRAINOPS_AGENT_HOST'], os.getsid(0) == os.getpid(), flush=True)\n",
]


def _wait_gone(pid: int, timeout: float = 20) -> None:
    try:
        psutil.Process(pid).wait(timeout=timeout)
    except psutil.NoSuchProcess:
        return


def test_spare_receives_its_launch_and_redirects_output(tmp_path: Path) -> None:
    spare = StandbyAgent(ECHO_AGENT, dict(os.environ))
    assert spare.alive()
    output = tmp_path / "agent.out"
    pid = spare.hand_over({"TRAINOPS_AGENT_HOST": "algo-7"}, output)
    assert pid == spare.pid and not spare.alive()
    os.waitpid(pid, 0)
    assert output.read_text() == "launched algo-7 True\n"


def test_retired_spare_exits_on_end_of_input() -> None:
    spare = StandbyAgent(ECHO_AGENT, dict(os.environ))
    spare.retire()
    assert not spare.alive()
    assert not psutil.pid_exists(spare.pid) or psutil.Process(spare.pid).status() == "zombie"


def test_backend_launches_on_the_spare_and_refills(tmp_path: Path) -> None:
    backend = LocalBackend(Settings(home=tmp_path), agent_command=ECHO_AGENT, standby=True)
    backend.open()
    try:
        first_spare = backend._spare
        assert first_spare is not None
        handle = backend.launch(_launch(tmp_path), HostResources(cpus=[0]), {})
        assert handle.pid == first_spare.pid
        assert backend._spare is not None and backend._spare.pid != first_spare.pid
        _wait_gone(first_spare.pid)
        assert (
            (tmp_path / "state" / "algo-1" / "agent.out").read_text().startswith("launched algo-1")
        )
    finally:
        backend.close()
    assert backend._spare is None


def test_dead_spare_falls_back_to_a_fresh_process(tmp_path: Path) -> None:
    backend = LocalBackend(Settings(home=tmp_path), agent_command=ECHO_AGENT, standby=True)
    backend.open()
    try:
        spare = backend._spare
        assert spare is not None
        os.kill(spare.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while spare.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        handle = backend.launch(_launch(tmp_path, "algo-2"), HostResources(cpus=[0]), {})
        assert handle.pid != spare.pid
        assert handle.pid is not None
        _wait_gone(handle.pid)
    finally:
        backend.close()


@pytest.mark.parametrize("standby", [None, False])
def test_no_spare_for_custom_agents_unless_asked(tmp_path: Path, standby: bool | None) -> None:
    backend = LocalBackend(Settings(home=tmp_path), agent_command=ECHO_AGENT, standby=standby)
    backend.open()
    assert backend._spare is None
    backend.close()
