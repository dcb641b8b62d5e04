"""``HostAgent.begin``: the host's namespaces are begun before the agent's remaining set-up (the
agent's program calls it before its reporter's sender starts), and :meth:`HostAgent.run` takes
them over rather than making a second set; a ``begin`` that cannot make the tree leaves the
failure to ``run``, which reports it as before."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tests.agent._support import make_job
from trainops.agent.supervision._hostns import namespaces_available
from trainops.protocol import EventKind, HostOutcome

SCRIPT = "print('hello', flush=True)\n"


def _holders() -> list[psutil.Process]:
    """This process's children that hold a host's namespaces."""
    found = []
    for child in psutil.Process().children():
        try:
            if "--hold" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.mark.skipif(not namespaces_available(), reason="this machine allows no namespaces")
def test_begin_starts_the_holder_and_run_starts_the_script_in_it(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": SCRIPT})
    agent = job.agent()
    assert _holders() == []
    agent.begin()
    [holder] = _holders()  # started before run(), while the agent's program goes on
    assert (job.root / "model").is_dir()  # the tree it mounts at /opt/ml exists
    agent.begin()  # once only
    assert [p.pid for p in _holders()] == [holder.pid]
    result = agent.run()
    assert result.outcome is HostOutcome.COMPLETED, result.failure_reason
    # The one process of the host was started by that holder (run_held): no second holder.
    [process] = job.reporter.of(EventKind.PROCESS)
    assert process["pid"] == holder.pid
    assert "hello" in job.reporter.lines()
    assert _holders() == []


def test_begin_that_cannot_make_the_tree_leaves_the_failure_to_run(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": SCRIPT})
    job.root.parent.mkdir(parents=True, exist_ok=True)
    job.root.write_text("a file where the host's tree goes")  # hostile: the tree cannot exist
    agent = job.agent()
    agent.begin()  # does not raise, starts nothing
    assert _holders() == []
    result = agent.run()
    assert result.outcome is HostOutcome.INTERNAL_ERROR
    assert str(job.root) in (result.failure_reason or "")
    assert "Training" not in job.reporter.phases()
    assert _holders() == []
