"""How a backend starts a host agent: one command and a set of environment variables.

Every backend starts the same program (``python -m trainops.agent``) with the variables below;
the token travels in the environment, never on a command line other users can read.

A backend that makes the agent's state directory on the server's own machine (the local one)
may also hand the agent its assignment there (:func:`hand_over_assignment`): the agent then
reads it from that file (:func:`take_handed_assignment`) instead of asking the agent API, a
round trip to the server on every job's start. The file is private (0600, in the agent's 0700
state directory), holds no token, and is removed as it is read. It carries an HMAC-SHA256 of
the assignment keyed with the agent's token, which only the server and that agent hold: a file
planted by anyone else (a job's script on a machine without namespaces runs as the same user)
is not taken. An agent that finds none, or one that is not its own, asks the API as before.

Every agent also writes its own pid and start time in its state directory first thing
(:func:`record_agent_process`). A control plane stopped between starting an agent and recording
it (a SIGKILL in the middle of a launch) leaves a host with no handle; the next one finds the
agent there (:func:`read_agent_process`, through the backend) instead of taking a running agent
for one that never started. The state directory is outside every host tree: a script that can
write there runs unconfined, as the same user, and could signal any process anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trainops.protocol._messages import Assignment

__all__ = [
    "AGENT_PROCESS_FILE",
    "ASSIGNMENT_FILE",
    "LAUNCH_FD_ENV",
    "LAUNCH_MARK",
    "PARENT_ENV",
    "STANDBY_ENV",
    "AgentLaunch",
    "agent_command",
    "hand_over_assignment",
    "read_agent_process",
    "record_agent_process",
    "take_handed_assignment",
]

ENV_SERVER = "TRAINOPS_AGENT_SERVER"
ENV_TOKEN = "TRAINOPS_AGENT_TOKEN"  # noqa: S105 (a variable name, not a secret)
ENV_JOB = "TRAINOPS_AGENT_JOB"
ENV_HOST = "TRAINOPS_AGENT_HOST"
ENV_ATTEMPT = "TRAINOPS_AGENT_ATTEMPT"
ENV_ROOT = "TRAINOPS_AGENT_ROOT"
ENV_STATE = "TRAINOPS_AGENT_STATE"
# Set on the local backend's agent fork server: imported once, it forks one agent for each
# LAUNCH_MARK byte on its stdin (a Unix socket), which carries the read end of a pipe holding
# the launch, {"env": launch variables, "output": path}; each child replies its pid.
STANDBY_ENV = "TRAINOPS_AGENT_STANDBY"
LAUNCH_MARK = b"L"
# Set on a fresh agent that reads its launch (the same JSON) from this inherited pipe instead of
# its environment, so that its token never shows in /proc/<pid>/environ.
LAUNCH_FD_ENV = "TRAINOPS_AGENT_LAUNCH_FD"
# Set by a backend whose agent must end when the process that started it does (the Ray
# backend's actor): that process's pid. Without it an agent outlives its parent, as the local
# backend's must (they outlive the server).
PARENT_ENV = "TRAINOPS_AGENT_PARENT"
# In the agent's state directory: its assignment, handed over by a backend that makes that
# directory itself (see the module docstring).
ASSIGNMENT_FILE = "assignment.json"
# In the agent's state directory: {"pid": int, "create_time": float} of the agent's process.
AGENT_PROCESS_FILE = "agent.pid"
_MAX_PROCESS_FILE = 256
_MAX_ASSIGNMENT = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AgentLaunch:
    """Where an agent reports and where it works.

    ``root`` is the host's /opt/ml-shaped tree; ``state_dir`` holds the agent's own files (its
    event journal and log), outside the tree the script sees.
    """

    server_url: str
    token: str
    job_name: str
    host: str
    attempt: int
    root: Path
    state_dir: Path
    # What the agent API would answer the agent (never in env(): a backend that can, hands it
    # over in the state directory; see hand_over_assignment).
    assignment: Assignment | None = field(default=None, compare=False, repr=False)

    def env(self) -> dict[str, str]:
        return {
            ENV_SERVER: self.server_url,
            ENV_TOKEN: self.token,
            ENV_JOB: self.job_name,
            ENV_HOST: self.host,
            ENV_ATTEMPT: str(self.attempt),
            ENV_ROOT: str(self.root),
            ENV_STATE: str(self.state_dir),
        }

    @classmethod
    def from_env(cls, env: dict[str, str]) -> AgentLaunch:
        missing = [
            v
            for v in (ENV_SERVER, ENV_TOKEN, ENV_JOB, ENV_HOST, ENV_ATTEMPT, ENV_ROOT, ENV_STATE)
            if v not in env
        ]
        if missing:
            raise KeyError(f"agent started without {', '.join(missing)}")
        return cls(
            server_url=env[ENV_SERVER],
            token=env[ENV_TOKEN],
            job_name=env[ENV_JOB],
            host=env[ENV_HOST],
            attempt=int(env[ENV_ATTEMPT]),
            root=Path(env[ENV_ROOT]),
            state_dir=Path(env[ENV_STATE]),
        )


def hand_over_assignment(launch: AgentLaunch) -> None:
    """Write ``launch.assignment`` where its agent looks first (its state directory, which the
    backend has just made); nothing where there is none or it cannot be written (the agent then
    asks the agent API)."""
    if launch.assignment is None:
        return
    assignment = json.dumps(launch.assignment.to_json())
    mac = _mac(launch.token, assignment)
    body = json.dumps({"assignment": assignment, "mac": mac}).encode("utf-8")
    path = launch.state_dir / ASSIGNMENT_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:  # one there already is not ours: the agent will not take it (no MAC)
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()


def take_handed_assignment(launch: AgentLaunch) -> Assignment | None:
    """The assignment handed over for this launch (the file removed), or ``None``: there is
    none, it is cut short or malformed, its MAC is not this launch's token's, or it names
    another job, attempt or host."""
    path = launch.state_dir / ASSIGNMENT_FILE
    try:
        body = _read_regular_file(path)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    if body is None:
        return None
    if len(body) > _MAX_ASSIGNMENT:
        return None
    try:
        handed = json.loads(body)
        text, mac = handed["assignment"], handed["mac"]
        if not hmac.compare_digest(str(mac), _mac(launch.token, str(text))):
            return None
        assignment = Assignment.from_json(json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    mine = (launch.job_name, launch.attempt, launch.host)
    theirs = (assignment.job_name, assignment.attempt, assignment.current_host)
    return assignment if mine == theirs else None


def _read_regular_file(path: Path) -> bytes | None:
    """At most one byte more than :data:`_MAX_ASSIGNMENT` of the regular file at ``path``;
    ``None`` for anything else. A link is not followed, and a FIFO or a device is neither
    waited on nor read (planted by a same-user script, either would hold the agent)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(_MAX_ASSIGNMENT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def record_agent_process(state_dir: Path) -> None:
    """Say in ``state_dir`` which process this agent is (its pid and its start time, as
    ``psutil`` gives it); written whole or not at all, and nothing where it cannot be."""
    import psutil  # the agent has it imported already

    body = json.dumps({"pid": os.getpid(), "create_time": psutil.Process().create_time()})
    path = state_dir / AGENT_PROCESS_FILE
    partial = path.with_name(f".{AGENT_PROCESS_FILE}.{os.getpid()}")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, body.encode("ascii"))
        finally:
            os.close(fd)
        os.replace(partial, path)
    except OSError:  # a full disk: the agent still runs, only a crash's recovery is slower
        with contextlib.suppress(OSError):
            partial.unlink()


def read_agent_process(state_dir: Path) -> tuple[int, float] | None:
    """The pid and start time the agent of ``state_dir`` recorded; ``None`` if it has not (yet),
    or what is there is not such a record."""
    body = _read_regular_file(state_dir / AGENT_PROCESS_FILE)
    if body is None or len(body) > _MAX_PROCESS_FILE:
        return None
    try:
        record = json.loads(body)
        pid, created = record["pid"], record["create_time"]
    except (ValueError, TypeError, KeyError):
        return None
    if type(pid) is not int or pid <= 1 or not isinstance(created, int | float):
        return None
    return pid, float(created)


def _mac(token: str, assignment: str) -> str:
    key = token.encode("utf-8")
    return hmac.new(key, assignment.encode("utf-8"), hashlib.sha256).hexdigest()


def agent_command() -> list[str]:
    """The argv that starts a host agent with the current interpreter."""
    return [sys.executable, "-m", "trainops.agent"]
