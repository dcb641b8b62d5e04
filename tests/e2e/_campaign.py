"""The chaos campaign's parts: its job script, and the faults it injects into a running spot job.

The script is a tiny deterministic "model" (a SHA-256 chain over the steps), so that an
interrupted run's final state must equal an uninterrupted run's bit for bit. It is written to be
hard on checkpoints: it writes each one in place (no temporary name), in chunks, and at the
notice (SIGTERM) it writes one more and dies of the signal, so a short notice's SIGKILL lands in
the middle of a write. Every checkpoint carries a checksum; at start the script checks every
file it finds in /opt/ml/checkpoints (all of them came from the restore: each attempt starts
on a fresh tree) and prints ``CORRUPT checkpoint restored: NAME`` for each that does not match.
Before its last step it waits for the file named by ``--gate``, so that the campaign's faults
all land while it runs.

:class:`Faults` injects one fault of a kind: an interruption through the REST API with a notice
of 1 s (``interrupt``) or of 0.1 s (``rank``: SIGKILL mid-write), a SIGKILL of the host agent
(``agent``), of the agent and every process of its host (``host``: what the agent started and
what its attempt's marker marks, never the next attempt's), or of the server, started again at
once (``server``).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests._support.processes import host_agent, job_processes
from tests.e2e._harness import Server, wait_for
from trainops import TrainopsError
from trainops._home import home_token
from trainops.agent.supervision._reaper import MARKER_VARIABLE
from trainops.client import Client

SCRIPT = r"""
import argparse, hashlib, os, signal, struct, sys, time
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int)
parser.add_argument("--gate")
args, _ = parser.parse_known_args()
CK = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
HEADER, SIZE, CHUNK = struct.Struct("<q32s"), 1 << 18, 1 << 15
notice = []
signal.signal(signal.SIGTERM, lambda *_: notice.append(time.time()))

def read(path):
    with open(path, "rb") as handle:
        data = handle.read()
    if len(data) != HEADER.size + SIZE:
        return None
    step, digest = HEADER.unpack_from(data)
    payload = data[HEADER.size:]
    return (step, payload[:32]) if hashlib.sha256(payload).digest() == digest else None

def write(step, state):
    payload = state * (SIZE // 32)
    with open(os.path.join(CK, f"ckpt-{step:06d}.bin"), "wb") as handle:
        handle.write(HEADER.pack(step, hashlib.sha256(payload).digest()))
        for i in range(0, SIZE, CHUNK):
            handle.write(payload[i:i + CHUNK])
            handle.flush()
            time.sleep(0.002)
    for old in sorted(f for f in os.listdir(CK) if f.startswith("ckpt-"))[:-2]:
        os.remove(os.path.join(CK, old))

os.makedirs(CK, exist_ok=True)
step, state = 0, hashlib.sha256(b"campaign").digest()
for name in sorted(f for f in os.listdir(CK) if f.startswith("ckpt-")):
    got = read(os.path.join(CK, name))
    if got is None:
        print(f"CORRUPT checkpoint restored: {name}", flush=True)
    elif got[0] > step:
        step, state = got
print(f"resumed step={step}", flush=True)
for s in range(step + 1, args.steps + 1):
    while s == args.steps and not os.path.exists(args.gate) and not notice:
        time.sleep(0.05)
    if notice:
        write(s - 1, state)
        print(f"notice: checkpoint at step {s - 1}", flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
    state = hashlib.sha256(state + s.to_bytes(8, "little")).digest()
    time.sleep(0.02)
    if s % 3 == 0:
        write(s, state)
print(f"final={state.hex()}", flush=True)
"""

KINDS = {"interrupt": 35, "rank": 25, "agent": 15, "host": 10, "server": 15}
RETRY_KINDS = ("agent", "host")  # an internal error: each uses one of the job's retries
# How often the job's phase is asked for (one describe through the REST API, a few
# milliseconds): each fault waits for the job to be back in Training, and a coarser poll would
# add half its interval to every one of the hundred.
POLL = 0.02


@dataclass
class Faults:
    """Injects the campaign's faults into job ``job`` on ``server``; counts what it did."""

    server: Server
    job: str
    rng: random.Random
    retries_left: int
    done: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = Client(self.server.url, home_token(self.server.home))

    def close(self) -> None:
        self.client.close()

    def pick(self) -> str:
        kinds = [k for k in KINDS if self.retries_left > 0 or k not in RETRY_KINDS]
        return self.rng.choices(kinds, weights=[KINDS[k] for k in kinds])[0]

    def phase(self) -> str | None:
        """``ended``, ``training``, or None while the job is between attempts."""
        described = self.client.describe(self.job)
        if described["TrainingJobStatus"] != "InProgress":
            return "ended"
        return "training" if described["SecondaryStatus"] == "Training" else None

    def inject(self, kind: str) -> bool:
        """One fault of ``kind``; False when it could not land (the job left Training)."""
        if kind == "server":
            self._restart_server()
        elif wait_for(self.phase, timeout=180, interval=POLL) != "training":
            return False
        else:
            # The moment within Training is random: the campaign's input, not a wait.
            time.sleep(self.rng.uniform(0.05, 0.3))
            if not self._land(kind):
                return False
        self.done.append(kind)
        return True

    def _land(self, kind: str) -> bool:
        if kind in ("interrupt", "rank"):
            return self._interrupt(1.0 if kind == "interrupt" else 0.1)
        if not self._kill_agent(everything=kind == "host"):
            return False
        self.retries_left -= 1
        return True

    def _interrupt(self, notice: float) -> bool:
        try:
            self.client.interrupt_job(self.job, notice_seconds=notice, capacity_gap_seconds=0.0)
        except TrainopsError:
            return False  # it left Training between the look and the call
        return True

    def _kill_agent(self, *, everything: bool) -> bool:
        agents = agents_of(self.job)
        if not agents:
            return False
        victims = list(agents)
        if everything:  # the whole host: its agent, what the agent started, its attempt's marks
            victims += host_processes(self.job, agents)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return True

    def _restart_server(self) -> None:
        self.client.close()
        self.server.kill()
        self.server.start()
        self.client = Client(self.server.url, home_token(self.server.home))


def agents_of(job: str) -> dict[int, bytes]:
    """The host agents running ``job``'s script, by pid, each with its attempt's marker prefix
    (``<job>/attempt-<n>/``): the nearest ancestor of a process of the job's (its marker says
    so) whose command line is the agent's."""
    found: dict[int, bytes] = {}
    for proc in psutil.process_iter():
        try:
            marker = _marker(proc.pid)
            if not marker.startswith(f"{job}/attempt-".encode()):
                continue
            agent = host_agent(proc)
        except psutil.Error:
            continue
        if agent is not None:
            found[agent.pid] = b"/".join(marker.split(b"/")[:2]) + b"/"
    return found


def host_processes(job: str, agents: dict[int, bytes]) -> list[int]:
    """Every process of the hosts of ``agents`` (from :func:`agents_of`): what each agent
    started, and the processes marked with its attempt (a daemon that left it). Never another
    attempt's: a host killed whole is the one that ran, not the next attempt's, which may be
    starting while the last one's agent ends (its new script not yet marked when the agents
    were looked for)."""
    victims = set()
    for pid in agents:
        with contextlib.suppress(psutil.Error):
            victims.update(child.pid for child in psutil.Process(pid).children(recursive=True))
    attempts = tuple(agents.values())
    for proc in job_processes(job):
        if _marker(proc.pid).startswith(attempts):
            victims.add(proc.pid)
    return sorted(victims - set(agents))


def _marker(pid: int) -> bytes:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""
    prefix = MARKER_VARIABLE.encode() + b"="
    return next((e[len(prefix) :] for e in raw.split(b"\0") if e.startswith(prefix)), b"")
