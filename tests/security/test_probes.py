"""Red-team probes, run for real: a hostile script tries to reach what its job must not.

A server runs a two-host "victim" job that waits, then a hostile single-host job runs
``_hostile.py``, which tries to read the home's API token and store, list and read the victim's
tree and its own agent's files, see the victim's and the server's processes, read the agent
fork server's environment and memory and ptrace it, read or ptrace its own namespace's init,
unmount the mask over the home (directly and from a user namespace of its own), connect to the
victim's remote-shell socket, find the home in its environment, move itself out of its cgroup,
and read the machine's disk (directly and through a node it makes). Every probe must be
refused. On a machine that allows no namespaces the job runs unisolated (docs/isolation.md), so
the probes are skipped there.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.e2e._harness import Server, describe, trainops, wait_for, write_job
from trainops.agent.supervision._hostns import namespaces_available

pytestmark = pytest.mark.slow

VICTIM = "isolation-victim"
HOSTILE = "isolation-hostile"
MARKER = "victim-marker-8c41"
PROBES = (
    "read the token file",
    "list the home",
    "read the store",
    "list another job's tree",
    "read another job's config",
    "read its own agent's host log",
    "see another job's processes",
    "see the server's process",
    "read the fork server's environ",
    "read the fork server's memory",
    "ptrace the fork server",
    "read the init's environ",
    "ptrace the init",
    "umount the home's mask",
    "umount it in a user namespace",
    "connect to another job's rsh socket",
    "find the home in its environment",
    "move out of its cgroup",
    "read the machine's disk",
    "mknod the machine's disk",
)
WAITS = """
import os, sys, time
release = os.environ["SM_HP_RELEASE"]
while not os.path.exists(release):
    time.sleep(0.05)
"""


def _fork_server(home: Path) -> int:
    """The pid of the home's agent fork server (it holds no job, but is the agents' parent)."""
    for proc in psutil.process_iter(["pid"]):
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("TRAINOPS_AGENT_STANDBY") == "1" and env.get("TRAINOPS_HOME") == str(home):
            return int(proc.info["pid"])
    return 0


def _victim_socket() -> Path | None:
    """The remote-shell socket of the victim's agent: the one an ancestor of its script (found
    by the marker in its command line) listens on."""
    for proc in psutil.process_iter(["cmdline"]):
        if MARKER not in (proc.info["cmdline"] or []):
            continue
        for parent in proc.parents():
            try:
                sockets = parent.net_connections(kind="unix")
            except psutil.Error:
                continue
            for found in sockets:
                if isinstance(found.laddr, str) and found.laddr.endswith("/rsh.sock"):
                    return Path(found.laddr)
    return None


def _block_device() -> str:
    """A block device of the machine, a disk rather than a loop device where there is one."""
    for name in sorted(os.listdir("/dev"), key=lambda n: n.startswith(("loop", "ram"))):
        path = f"/dev/{name}"
        try:
            if stat.S_ISBLK(os.stat(path).st_mode):
                return path
        except OSError:
            continue
    return ""


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if not namespaces_available():
        pytest.skip("this machine allows no namespaces: jobs run unisolated here")
    base = tmp_path_factory.mktemp("probes")
    home, release = base / "home", base / "release"
    server = Server(home, TRAINOPS_LOCAL_CPUS="6", TRAINOPS_LOCAL_MEMORY_MB="48000").start()
    try:
        victim = write_job(
            base / "victim",
            WAITS,
            job_name=VICTIM,
            instance_count=2,
            instance_type="ml.m5.large",
            hyperparameters={"release": str(release), "marker": MARKER},
        )
        submitted = trainops("submit", str(victim), home=home, **server.env())
        assert submitted.returncode == 0, submitted.stderr
        victim_tree = home / "jobs" / VICTIM / "attempt-1" / "algo-1"
        socket = wait_for(_victim_socket, timeout=120)
        wait_for(lambda: (victim_tree / "input" / "config").is_dir(), timeout=60)
        out, device = base / "results.json", _block_device()
        hostile = write_job(
            base / "hostile",
            (Path(__file__).parent / "_hostile.py").read_text(),
            job_name=HOSTILE,
            instance_type="ml.m5.large",
            hyperparameters={
                "home": str(home),
                "own_job": HOSTILE,
                "victim_tree": str(victim_tree),
                "victim_marker": MARKER[::-1],  # not the marker itself: its own argv
                "victim_socket": str(socket),
                "server_pid": server.proc.pid if server.proc else 0,
                "fork_server_pid": _fork_server(home),
                "block_device": device,
                "block_rdev": os.stat(device).st_rdev if device else 0,
                "out": str(out),
            },
        )
        ran = trainops("run", str(hostile), home=home, **server.env())
        assert ran.returncode == 0, ran.stdout + ran.stderr
        # What the probes aimed at is there, seen from outside: a refusal is the job's wall.
        assert (home / "token").is_file() and (home / "trainops.db").is_file()
        assert (victim_tree / "input" / "config" / "hyperparameters.json").is_file()
        assert socket.exists() and _fork_server(home) > 0
        yield json.loads(out.read_text())
    finally:
        release.touch()
        wait_for(
            lambda: describe(VICTIM, home, **server.env())["TrainingJobStatus"] != "InProgress"
        )
        server.stop()


@pytest.mark.parametrize("probe", PROBES)
def test_a_hostile_script_is_refused(probes: dict[str, str], probe: str) -> None:
    if probe not in probes:
        pytest.skip(f"{probe}: nothing to try on this machine")
    assert probes[probe].startswith("refused:"), f"{probe}: {probes[probe]}"


def test_every_probe_ran(probes: dict[str, str]) -> None:
    assert set(probes) >= set(PROBES) - {"read the machine's disk", "mknod the machine's disk"}
