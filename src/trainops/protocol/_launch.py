"""How a backend starts a host agent: one command and a set of environment variables.

Every backend starts the same program (``python -m trainops.agent``) with the variables below;
the token travels in the environment, never on a command line other users can read.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LAUNCH_FD_ENV",
    "LAUNCH_MARK",
    "PARENT_ENV",
    "STANDBY_ENV",
    "AgentLaunch",
    "agent_command",
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


def agent_command() -> list[str]:
    """The argv that starts a host agent with the current interpreter."""
    return [sys.executable, "-m", "trainops.agent"]
