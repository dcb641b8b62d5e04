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


def _children() -> set[int]:
    """This process's children (a holder just started may not have exec'd yet: counted by pid,
    whatever its command line says at that moment)."""
    return {child.pid for child in psutil.Process().children()}


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.skipif(not namespaces_available(), reason="this machine allows no namespaces")
def test_begin_starts_the_holder_and_run_starts_the_script_in_it(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": SCRIPT})
    agent = job.agent()
    before = _children()
    agent.begin()
    [holder] = _children() - before  # started before run(), while the agent's program goes on
    assert (job.root / "model").is_dir()  # the tree it mounts at /opt/ml exists
    agent.begin()  # once only
    assert _children() - before == {holder}
    result = agent.run()
    assert result.outcome is HostOutcome.COMPLETED, result.failure_reason
    # The one process of the host was started by that holder (run_held): no second holder.
    [process] = job.reporter.of(EventKind.PROCESS)
    assert process["pid"] == holder
    assert "hello" in job.reporter.lines()
    assert _gone(holder)


def test_begin_that_cannot_make_the_tree_leaves_the_failure_to_run(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": SCRIPT})
    job.root.parent.mkdir(parents=True, exist_ok=True)
    job.root.write_text("a file where the host's tree goes")  # hostile: the tree cannot exist
    agent = job.agent()
    before = _children()
    agent.begin()  # does not raise, starts nothing
    assert _children() == before
    result = agent.run()
    assert result.outcome is HostOutcome.INTERNAL_ERROR
    assert str(job.root) in (result.failure_reason or "")
    assert "Training" not in job.reporter.phases()
    assert _children() <= before
