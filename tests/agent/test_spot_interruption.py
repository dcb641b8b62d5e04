"""A spot interruption on one host, through the real agent: the notice (SIGTERM to every rank,
SIGKILL when it runs out), the last checkpoint sync and its record, a checkpoint file left torn
by the kill never uploaded, and the restore on another host from object storage only."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.agent._support import JobFixture, make_job
from trainops.agent import HostResult
from trainops.agent.launchers import available_launchers
from trainops.protocol import Command, EventKind, HostOutcome

DEADLINE = 60.0  # a wait that never ends is a failure, not a timing figure

WRITES_ON_SIGTERM = """
import os, signal, sys, time
ckpt = os.environ["SM_CHECKPOINT_DIR"] if "SM_CHECKPOINT_DIR" in os.environ else "/opt/ml/checkpoints"
def on_term(signum, frame):
    with open(os.path.join(ckpt, f"rank-{os.getpid()}.ckpt"), "w") as handle:
        handle.write("saved in the notice")
    print("checkpointed on SIGTERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

# Writes ckpt.bin whole, waits until the object store has it, then rewrites it in place slowly
# and never finishes (it ignores SIGTERM): the notice's SIGKILL cuts that write short.
TORN_WRITE = """
import argparse, os, signal, time
parser = argparse.ArgumentParser()
parser.add_argument("--remote")
args, _ = parser.parse_known_args()
ckpt = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
path = os.path.join(ckpt, "ckpt.bin")
if os.path.exists(path):
    print("resumed from", os.path.getsize(path), "bytes", flush=True)
signal.signal(signal.SIGTERM, lambda signum, frame: print("SIGTERM: still writing", flush=True))
with open(path, "wb") as handle:
    handle.write(b"A" * 1_000_000)
while not (os.path.exists(os.path.join(args.remote, "ckpt.bin"))
           and os.path.exists(os.path.join(args.remote, ".trainops"))):
    time.sleep(0.02)
with open(path, "wb") as handle:
    print("rewriting", flush=True)
    while True:
        handle.write(b"B" * 10_000)
        handle.flush()
        time.sleep(0.01)
"""

# The same, but a SIGTERM ends it as Python's default does (at once, mid-write).
TORN_WRITE_ANY_SIGNAL = TORN_WRITE.replace(
    'signal.signal(signal.SIGTERM, lambda signum, frame: print("SIGTERM: still writing", flush=True))\n',
    "",
)


def _run(job: JobFixture) -> tuple[threading.Thread, list[HostResult]]:
    results: list[HostResult] = []
    runner = threading.Thread(target=lambda: results.append(job.run()))
    runner.start()
    return runner, results


def _wait_lines(job: JobFixture, text: str, count: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while sum(text in line for line in job.reporter.lines()) < count:
        assert time.monotonic() < deadline, f"fewer than {count} {text!r}: {job.reporter.lines()}"
        time.sleep(0.02)


def _script_pid(job: JobFixture) -> int:
    """The script's own process (the reported one may be the namespace holder above it)."""
    [process] = job.reporter.of(EventKind.PROCESS)
    top = psutil.Process(process["pid"])
    [script] = [p for p in [top, *top.children(recursive=True)] if "train.py" in p.cmdline()]
    return script.pid


def _records(job: JobFixture) -> list[dict[str, Any]]:
    return job.reporter.of(EventKind.CHECKPOINT)


def _interrupt(job: JobFixture, notice: float) -> None:
    job.reporter.push(
        Command("stop", reason="spot capacity reclaimed", grace_seconds=notice, interrupted=True)
    )


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["plain", "torch_distributed", "mpi"])
def test_the_notice_reaches_every_rank_and_their_checkpoints_are_synced(
    tmp_path: Path, launcher: str
) -> None:
    if launcher not in available_launchers():
        pytest.skip(f"{launcher} is not installed here")
    switch = {"plain": {}, "torch_distributed": {"torch_distributed": {"enabled": True}},
              "mpi": {"mpi": {"enabled": True}}}[launcher]  # fmt: skip
    remote = tmp_path / "ckpt-remote"
    job = make_job(
        tmp_path,
        {"train.py": WRITES_ON_SIGTERM},
        checkpoint={"uri": remote.as_uri()},
        distribution={**switch, "processes_per_host": 2},
        mount_opt_ml=False,
    )
    runner, results = _run(job)
    _wait_lines(job, "ready", 2)
    _interrupt(job, notice=30.0)
    runner.join(DEADLINE)
    assert results and results[0].outcome is HostOutcome.STOPPED
    assert sum("checkpointed on SIGTERM" in line for line in job.reporter.lines()) == 2
    uploaded = sorted(p.name for p in remote.glob("rank-*.ckpt"))
    assert len(uploaded) == 2, job.reporter.lines()
    assert all((remote / name).read_text() == "saved in the notice" for name in uploaded)
    assert any("Interrupted (spot capacity reclaimed)" in ln for ln in job.reporter.lines("agent"))
    # One record of the last sync (files uploaded while training have records of their own).
    [synced] = [r for r in _records(job) if r["kind"] == "synced" and not r.get("reason")]
    assert (synced["files"], synced["bytes"]) == (2, 2 * len("saved in the notice"))
    assert synced["newest_write"] is not None and synced["upload_seconds"] is not None


@pytest.mark.slow
def test_a_checkpoint_torn_by_the_kill_is_never_restored_on_another_host(tmp_path: Path) -> None:
    remote = tmp_path / "ckpt-remote"
    spec: dict[str, Any] = {
        "checkpoint": {"uri": remote.as_uri()},
        "hyperparameters": {"remote": str(remote)},
        "mount_opt_ml": False,
    }
    first = make_job(tmp_path / "one", {"train.py": TORN_WRITE}, **spec)
    runner, results = _run(first)
    _wait_lines(first, "rewriting", 1)
    _interrupt(first, notice=0.3)
    runner.join(DEADLINE)
    assert results and results[0].outcome is HostOutcome.STOPPED and results[0].exit_code == -9
    # The local file is torn (some Bs); the object store still has the finished version.
    assert (first.root / "checkpoints/ckpt.bin").read_bytes()[:1] == b"B"
    assert (remote / "ckpt.bin").read_bytes() == b"A" * 1_000_000
    [incomplete] = [r for r in _records(first) if r["kind"] == "sync_incomplete"]
    assert "ckpt.bin" in incomplete["reason"] and "being written" in incomplete["reason"]
    assert any("ckpt.bin was still being written" in ln for ln in first.reporter.lines("agent"))

    # Another host, another machine's folders: only the object store is shared.
    second = make_job(tmp_path / "two", {"train.py": TORN_WRITE}, host="algo-2", attempt=2, **spec)
    second.reporter.push(Command("stop", reason="done", grace_seconds=0.0))  # restore, then stop
    assert second.run().outcome is HostOutcome.STOPPED
    restored_file = second.root / "checkpoints/ckpt.bin"
    assert hashlib.sha256(restored_file.read_bytes()).digest() == (
        hashlib.sha256(b"A" * 1_000_000).digest()
    )
    [restored] = [r for r in _records(second) if r["kind"] == "restored"]
    assert (restored["files"], restored["bytes"]) == (1, 1_000_000)
    assert "ckpt.bin" in restored["reason"] and "algo-1 (attempt 1)" in restored["reason"]
    assert restored["newest_write"] is not None
    assert not (second.root / "checkpoints/.trainops").exists()  # the manifests stay remote


def test_a_failing_checkpoint_sync_is_reported_live_and_its_recovery_too(tmp_path: Path) -> None:
    remote = tmp_path / "ckpt-remote"
    remote.write_text("a file where the prefix's folder should be")  # every upload fails
    go = tmp_path / "go"
    script = (
        "import os, time\n"
        "open(os.path.join(os.environ['SM_CHECKPOINT_DIR'], 'step-1.pt'), 'w').write('w')\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    time.sleep(0.02)\n"
    )
    job = make_job(
        tmp_path, {"train.py": script}, checkpoint={"uri": remote.as_uri()}, mount_opt_ml=False
    )
    runner, results = _run(job)
    deadline = time.monotonic() + DEADLINE
    while not any(r["kind"] == "sync_failed" for r in _records(job)):
        assert time.monotonic() < deadline, job.reporter.lines()
        time.sleep(0.02)
    remote.unlink()  # the store takes writes again
    _wait_lines(job, "recovered", 1)
    go.touch()
    runner.join(DEADLINE)
    assert results and results[0].outcome is HostOutcome.COMPLETED
    kinds = [r["kind"] for r in _records(job)]
    assert kinds.count("sync_failed") == 1  # once, not once per retry
    assert kinds[-1] == "synced"
    [failed] = [r for r in _records(job) if r["kind"] == "sync_failed"]
    assert "ckpt-remote" in failed["reason"]
    assert any("checkpoint sync failing" in ln for ln in job.reporter.lines("agent"))
    assert (remote / "step-1.pt").read_text() == "w"


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_checkpoint_torn_by_a_kill_from_outside_is_never_uploaded(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """The OOM killer (or anyone but the agent) kills the script mid-write: the agent did not
    send the signal, so it could not look for writers first; the file that death closed is
    still never uploaded, and the object store keeps its last finished version."""
    remote = tmp_path / "ckpt-remote"
    job = make_job(
        tmp_path,
        {"train.py": TORN_WRITE_ANY_SIGNAL},
        checkpoint={"uri": remote.as_uri()},
        hyperparameters={"remote": str(remote)},
        mount_opt_ml=False,
    )
    runner, results = _run(job)
    _wait_lines(job, "rewriting", 1)
    os.kill(_script_pid(job), sig)
    runner.join(DEADLINE)
    assert results and results[0].outcome is HostOutcome.FAILED, results
    assert (job.root / "checkpoints/ckpt.bin").read_bytes()[:1] == b"B"  # torn locally
    assert (remote / "ckpt.bin").read_bytes() == b"A" * 1_000_000
    [incomplete] = [r for r in _records(job) if r["kind"] == "sync_incomplete"]
    assert "ckpt.bin" in incomplete["reason"] and "half-written" in incomplete["reason"]
    said = f"ckpt.bin was written in place just before the script died of {sig.name}"
    assert any(said in ln for ln in job.reporter.lines("agent")), job.reporter.lines("agent")
