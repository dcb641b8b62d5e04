"""Probe: a process of the agent's own user cannot read a non-dumpable agent's memory or
environment, while the agent still reads its children's ``/proc`` entries.

As root, the probe forks a process that becomes an unprivileged user (``nobody``) and plays the
agent: it starts a child with ``exec`` (the script: dumpable again), reads that child's
``/proc``, and forks a second process of the same user (a hostile script) that tries to read the
agent's ``/proc/<pid>/environ`` and ``mem``. Once with the agent dumpable (the reads succeed: the
probe can fail) and once after :func:`forbid_memory_reads` (they are refused).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from trainops.agent.supervision._nodump import forbid_memory_reads

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="the probe switches to an unprivileged user: it needs Linux and root",
)

_NOBODY = 65534
_PR_SET_DUMPABLE = 4


def _sibling_reads(pid: int) -> dict[str, bool]:
    """Which of ``pid``'s /proc files a forked process of the same user can read."""
    read_end, write_end = os.pipe()
    probe = os.fork()
    if probe == 0:
        found = {}
        for name in ("environ", "mem"):
            try:
                with open(f"/proc/{pid}/{name}", "rb", buffering=0) as handle:
                    if name == "mem":
                        handle.seek(_a_mapped_address(pid))
                    handle.read(16)
                found[name] = True
            except OSError:
                found[name] = False
        os.write(write_end, json.dumps(found).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(probe, 0)
    with os.fdopen(read_end, "rb") as answer:
        result: dict[str, bool] = json.loads(answer.read())
    return result


def _a_mapped_address(pid: int) -> int:
    """The start of the stack of ``pid``, as its maps say (0 if they cannot be read)."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                if line.rstrip().endswith("[stack]"):
                    return int(line.split("-", 1)[0], 16)
    except OSError:
        pass
    return 0


def _child_readable(pid: int) -> bool:
    """Whether the agent reads its exec'd child's ``environ`` and ``status``.

    ``Popen`` returns once the child's close-on-exec pipe closes, a moment before the kernel
    makes the new program dumpable again: until then a read is refused. Wait for the exec to
    finish (bounded), not for a clock.
    """
    for _ in range(500):
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                environ.read()
            with open(f"/proc/{pid}/status") as status:
                return "Pid:" in status.read()
        except PermissionError:
            time.sleep(0.01)
    return False


def _play_agent(undumpable: bool) -> dict[str, object]:
    """In a forked process become ``nobody``, play the agent, and report what was read."""
    read_end, write_end = os.pipe()
    agent = os.fork()
    if agent == 0:
        try:
            os.setgroups([])
            os.setresgid(_NOBODY, _NOBODY, _NOBODY)
            os.setresuid(_NOBODY, _NOBODY, _NOBODY)
            # Changing user left the process non-dumpable: start from a dumpable one.
            ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
            if undumpable:
                assert forbid_memory_reads()
            script = subprocess.Popen([shutil.which("sleep") or "/bin/sleep", "60"])
            try:
                reads_child = _child_readable(script.pid)
                report = {"reads_child": reads_child, "sibling": _sibling_reads(os.getpid())}
            finally:
                script.kill()
                script.wait()
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(agent, 0)
    with os.fdopen(read_end, "rb") as answer:
        result: dict[str, object] = json.loads(answer.read() or b"{}")
    return result


def test_a_same_user_process_cannot_read_an_undumpable_agent() -> None:
    dumpable = _play_agent(undumpable=False)
    assert dumpable == {"reads_child": True, "sibling": {"environ": True, "mem": True}}
    guarded = _play_agent(undumpable=True)
    assert guarded == {"reads_child": True, "sibling": {"environ": False, "mem": False}}
