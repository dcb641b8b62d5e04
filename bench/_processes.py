"""Processes the launch-overhead benchmark starts, and the guarantee that it stops every one.

Every child gets a marker variable in its environment. Ray re-parents and re-titles its workers
and some of its agents drop the environment, so :class:`ProcessSweeper` finds what to stop two
ways: processes whose environment carries this run's marker, and descendants of the processes
it launched itself. It never matches by name, so other users of the machine are left alone.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

MARKER_VAR = "LAUNCH_OVERHEAD_RUN"


class BenchError(RuntimeError):
    """A measured command failed or a server did not come up."""


@dataclass
class ProcessSweeper:
    """Stops every process this benchmark run started, including re-parented ones."""

    marker: str = field(default_factory=lambda: uuid.uuid4().hex)
    roots: list[int] = field(default_factory=list)

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, MARKER_VAR: self.marker}

    def spawn(
        self, argv: Sequence[str], env: Mapping[str, str], log: Path
    ) -> subprocess.Popen[bytes]:
        """Start a long-lived process in its own session, output to ``log``."""
        with log.open("wb") as out:
            proc = subprocess.Popen(
                list(argv),
                env=self.env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.roots.append(proc.pid)
        return proc

    def ours(self) -> list[psutil.Process]:
        found: dict[int, psutil.Process] = {}
        for pid in self.roots:
            try:
                root = psutil.Process(pid)
                found.update({p.pid: p for p in [root, *root.children(recursive=True)]})
            except psutil.Error:
                continue
        for proc in psutil.process_iter():
            if proc.pid != os.getpid() and proc.pid not in found and self._marked(proc):
                found[proc.pid] = proc
        return list(found.values())

    def _marked(self, proc: psutil.Process) -> bool:
        try:
            return proc.environ().get(MARKER_VAR) == self.marker
        except psutil.Error:
            return False

    def stop_all(self, grace: float = 10.0) -> int:
        """SIGTERM everything of ours, SIGKILL what is left after ``grace``; returns the count."""
        procs = self.ours()
        for proc in procs:
            _signal(proc, kill=False)
        _gone, alive = psutil.wait_procs(procs, timeout=grace)
        for proc in alive:
            _signal(proc, kill=True)
        psutil.wait_procs(alive, timeout=grace)
        self.roots = [pid for pid in self.roots if psutil.pid_exists(pid)]
        return len(procs)


def _signal(proc: psutil.Process, *, kill: bool) -> None:
    with contextlib.suppress(psutil.Error):
        proc.kill() if kill else proc.terminate()


def run_timed(
    argv: Sequence[str],
    env: Mapping[str, str],
    sweeper: ProcessSweeper,
    expect: str,
    timeout: float,
) -> float:
    """Run ``argv`` to completion; returns its wall time. Fails unless rc 0 and ``expect`` printed."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        env=sweeper.env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        sweeper.roots.append(proc.pid)
        sweeper.stop_all(grace=2)
        raise BenchError(f"{' '.join(argv)}: still running after {timeout:.0f} s") from None
    elapsed = time.perf_counter() - start
    text = output.decode(errors="replace")
    if proc.returncode != 0 or expect not in text:
        tail = "\n".join(text.splitlines()[-25:])
        raise BenchError(f"{' '.join(argv)}: exit {proc.returncode}, expected {expect!r}\n{tail}")
    return elapsed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(
    check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        if check():
            return
        time.sleep(0.2)
    raise BenchError(f"{what} not ready after {timeout:.0f} s:\n{_tail(log)}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # loopback URL we built
            return bool(response.status == 200)
    except OSError:
        return False


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def tool(name: str) -> list[str]:
    """The console script ``name`` of this interpreter's environment."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return [str(beside)]
    raise BenchError(f"{name} not found next to {sys.executable}; install the project's extras")


def compile_trainops() -> None:
    """Byte-compile trainops' source, as ``pip install`` does for an installed package.

    An editable install run with ``PYTHONDONTWRITEBYTECODE`` set (as some CI images and this
    project's development machine do) never caches its bytecode, so every command would compile
    each trainops module it imports again: tens of milliseconds a user of a real install does not
    pay. Existing ``.pyc`` files are still read with that variable set.
    """
    import trainops

    source = Path(trainops.__file__).parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(source)], check=True)
