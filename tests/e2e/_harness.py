"""Helpers for end-to-end tests: write a job folder, run the real `trainops` CLI, read results."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import psutil
import yaml

CLI = [sys.executable, "-m", "trainops.cli"]


def write_job(folder: Path, script: str, *, entry_point: str = "train.py", **spec: Any) -> Path:
    """Write ``script`` and a job.yaml with ``spec`` fields into ``folder``; returns the yaml path."""
    src = folder / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / entry_point).write_text(script)
    doc = {"entry_point": entry_point, "source_dir": "src", **spec}
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "AWS_"))}
    env.update({"TRAINOPS_HOME": str(home), "PYTHONUNBUFFERED": "1", **extra})
    return env


def trainops(
    *args: str, home: Path, timeout: float = 240, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion and return its result (stdout/stderr as text)."""
    return subprocess.run(
        [*CLI, *args], env=cli_env(home, **extra), capture_output=True, text=True, timeout=timeout
    )


def describe(name: str, home: Path, **extra: str) -> dict[str, Any]:
    """The job's REST describe (``trainops describe --rest``: every key at the top)."""
    result = trainops("describe", name, "--rest", home=home, **extra)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def try_describe(name: str, home: Path, **extra: str) -> dict[str, Any] | None:
    """The REST description, or None while the job does not exist yet."""
    result = trainops("describe", name, "--rest", home=home, **extra)
    if result.returncode != 0:
        return None
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def statuses(description: dict[str, Any]) -> list[str]:
    return [t["Status"] for t in description["SecondaryStatusTransitions"]]


def run_client(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 240
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """Run an SDK client script that prints its result as JSON on its last line: the result,
    and the run (its output). Fails the test, with the output's tails, where the script did."""
    done = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result, done


def wait_for(predicate: Any, timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def artifact(description: dict[str, Any], name: str) -> str:
    uris = [a["Uri"] for a in description["Artifacts"] if a["Name"] == name]
    assert uris, f"no {name} artifact in {description['Artifacts']}"
    return uris[0]


def tar_members(uri: str) -> dict[str, bytes]:
    """Read a file:// tar.gz into {member name: content}."""
    assert uri.startswith("file://"), uri
    out = {}
    with tarfile.open(uri[len("file://") :], "r:gz") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            if handle is not None:
                out[member.name] = handle.read()
    return out


class Server:
    """A real `trainops server` process on a free loopback port."""

    def __init__(self, home: Path, **env: str) -> None:
        self.home = home
        self.extra_env = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self) -> Server:
        self.home.mkdir(parents=True, exist_ok=True)
        self._close_log()
        self._log = log = (self.home / f"server-{time.monotonic_ns()}.log").open("wb")
        self.proc = subprocess.Popen(
            [*CLI, "server", "--host", "127.0.0.1", "--port", str(self.port)],
            env=cli_env(self.home, **self.extra_env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._up, timeout=30, interval=0.05)
        return self

    def _up(self) -> bool:
        """Whether this server's own process listens on its port. A connect alone can reach
        something else there: in the chaos campaign on a machine busy with other suites, one
        succeeded a millisecond after a restarted server's start, long before it could listen
        (the port had been free since the previous server's SIGKILL)."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = self.home.glob("server-*.log")
            raise AssertionError(
                f"the server exited ({self.proc.returncode}); see {sorted(log)[-1]}"
            )
        try:
            listening = psutil.Process(self.proc.pid).net_connections(kind="tcp")
        except psutil.Error:
            return False
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == self.port for c in listening)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_log()

    def env(self) -> dict[str, str]:
        return {"TRAINOPS_SERVER": self.url}
