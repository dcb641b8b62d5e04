"""Probe: the local backend's agent fork server never holds a job's agent token.

Every agent on the local backend is forked from one long-lived fork server, so whatever it once
read (a launch's token) stays in its memory for every later agent, and any script able to read
that memory. The probe launches several agents through it (real standby code), lets some end,
then reads the fork server's whole memory (``/proc/<pid>/mem``, as root: the fork server is not
dumpable, so nobody else can) and the environment of the fork server and its agents, looking
for the tokens' bytes. It also checks that the fork server and the agents it forks are not
dumpable while the scripts they exec are.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import socket
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.backends.test_backend_conformance import _launch
from trainops._settings import Settings
from trainops.backends._local import LocalBackend, agent_process
from trainops.backends._standby import AgentForkServer
from trainops.protocol import HostResources

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="reading another process's memory needs Linux and root (CAP_SYS_PTRACE)",
)

# The real standby code, then an agent that stays up until its job says "end" (a file).
HOLD_AGENT = [
    sys.executable,
    "-c",
    "import os, sys, time\n"
    "from trainops.agent.supervision._nodump import forbid_memory_reads\n"
    "from trainops.agent.supervision._standby import serve_launches\n"
    "forbid_memory_reads()\n"
    "env = serve_launches()\n"
    "if env is None: sys.exit(0)\n"
    "import ctypes, subprocess\n"
    "end = os.environ['HOLD_UNTIL']\n"
    "mine = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)\n"  # PR_GET_DUMPABLE
    "child = subprocess.run([sys.executable, '-c', 'import ctypes;"
    " print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'], capture_output=True, text=True)\n"
    "print('up', mine, child.stdout.strip(), flush=True)\n"
    "while not os.path.exists(end): time.sleep(0.02)\n",
]
_REGION = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (r)")


def _memory(pid: int) -> bytes:
    """Every readable region of ``pid``'s memory, concatenated."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            match = _REGION.match(line)
            if match is None or line.rstrip().endswith(("[vvar]", "[vsyscall]")):
                continue
            start, end = int(match.group(1), 16), int(match.group(2), 16)
            try:
                chunks.append(os.pread(mem.fileno(), end - start, start))
            except OSError:
                continue
    return b"".join(chunks)


def _wait_for_text(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().endswith("\n")):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.02)
    return path.read_text()


def test_the_fork_server_holds_no_token_of_the_agents_it_forked(tmp_path: Path) -> None:
    forks = AgentForkServer(HOLD_AGENT, dict(os.environ))
    tokens = [secrets.token_urlsafe(32) for _ in range(6)]
    agents = []
    try:
        for index, token in enumerate(tokens):
            until = tmp_path / f"end-{index}"
            env = {"TRAINOPS_AGENT_TOKEN": token, "HOLD_UNTIL": str(until), "SECRET_X": token}
            pid = forks.launch(env, tmp_path / f"{index}.out")
            assert pid is not None
            # The agent is not dumpable (inherited from the fork server); what it execs is.
            assert _wait_for_text(tmp_path / f"{index}.out") == "up 0 1\n"
            agents.append((pid, until))
        for pid, until in agents[:3]:  # half of the jobs end
            until.touch()
            psutil.Process(pid).wait(timeout=30)
        memory = _memory(forks.pid)
        environ = Path(f"/proc/{forks.pid}/environ").read_bytes()
        assert len(memory) > 1_000_000  # the probe did read the fork server's memory
        assert [i for i, t in enumerate(tokens) if t.encode() in memory] == []
        assert [i for i, t in enumerate(tokens) if t.encode() in environ] == []
        for pid, _ in agents[3:]:  # an agent's environment as /proc shows it: no token either
            seen = Path(f"/proc/{pid}/environ").read_bytes()
            assert [i for i, t in enumerate(tokens) if t.encode() in seen] == []
    finally:
        for _pid, until in agents:
            until.touch()
        forks.retire()


@pytest.mark.parametrize("standby", [True, False], ids=["forked", "fresh"])
def test_a_real_agent_gets_its_token_but_not_in_its_environment(
    tmp_path: Path, standby: bool
) -> None:
    # A listening socket plays the control plane: the agent's first request (its assignment)
    # shows it has its token, which /proc/<agent>/environ must not show.
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(120)
        token = secrets.token_urlsafe(32)
        launch = dataclasses.replace(
            _launch(tmp_path), server_url=f"http://127.0.0.1:{server.getsockname()[1]}"
        )
        launch = dataclasses.replace(launch, token=token)
        backend = LocalBackend(Settings(home=tmp_path), standby=standby)
        backend.open()
        handle = None
        try:
            handle = backend.launch(launch, HostResources(cpus=[0]), {})
            connection, _ = server.accept()
            with connection:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(65536)
            assert f"Authorization: Bearer {token}".encode() in request
            pid, _created = agent_process(handle)
            assert pid is not None
            assert token.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
            if backend._forks is not None:
                assert token.encode() not in _memory(backend._forks.pid)
        finally:
            if handle is not None:
                backend.kill(handle)
            backend.close()
