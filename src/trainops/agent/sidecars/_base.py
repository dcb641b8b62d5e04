"""The sidecar contract: work that runs beside the training script on every host.

A sidecar is started with the Training phase and finished when the script has ended, before the
host's archives are packed; it hands back the artifacts it uploaded. Checkpoint sync,
intermediate-output sync and the system monitor are sidecars. The agent never learns what a
sidecar does: it calls, in order,

- :meth:`Sidecar.prepare` during Downloading (restore what the job starts from; may fail the job),
- :meth:`Sidecar.environment` while it builds the script's environment (variables to add),
- :meth:`Sidecar.start` just before the script starts,
- :meth:`Sidecar.before_kill` just before the script's processes get a stop's SIGKILL (its grace
  period, or a spot interruption's notice, ran out; they still hold what they had open),
- :meth:`Sidecar.script_killed` as soon as a process of the script is seen to have died of a
  signal the agent did not send (the out-of-memory killer, a crash, a kill from outside): that
  death closed what it was writing, maybe half-written,
- :meth:`Sidecar.finish` once the script has ended, whatever its outcome, and also when the job
  ended before the script began (final upload; returns the artifacts to record), or :meth:`Sidecar.abort` when the agent itself fails (stop now,
  upload nothing more).

Each sidecar decides whether its failure is the job's: raising from ``prepare`` or ``finish``
fails the host (a checkpoint that cannot be restored or uploaded), while a best-effort sidecar
(the monitor) logs through :attr:`SidecarContext.log` and carries on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops._settings import Settings
from trainops.agent.contract._outputs import Artifact, OutputLayout
from trainops.agent.contract._tree import HostTree
from trainops.protocol import Assignment, SubmittedJob
from trainops.storage import ObjectStore

__all__ = ["Sidecar", "SidecarContext", "SidecarFactory"]


@dataclass(frozen=True, slots=True)
class SidecarContext:
    """What a sidecar may use: the host's assignment, tree and output layout, a private state
    directory, object stores by URI, the settings, and the host log (agent lines)."""

    assignment: Assignment
    tree: HostTree
    layout: OutputLayout
    state_dir: Path
    settings: Settings
    store_for: Callable[[str], ObjectStore]
    log: Callable[[str], None]
    #: ``add_metric_listener(listener)``: hear every metric value scraped from the script's
    #: output as ``listener(name, ts, values)`` (quick, never raising; on another thread).
    add_metric_listener: Callable[[Callable[[str, float, list[float]], None]], None]
    sync_interval: float = 1.0
    #: ``report(kind, data)``: send an agent event (a checkpoint sync's ``checkpoint`` records).
    report: Callable[[str, dict[str, Any]], None] = field(default=lambda kind, data: None)
    #: Whether the host's stop is a spot interruption (its last sync says what it left).
    interrupted: Callable[[], bool] = field(default=lambda: False)

    @property
    def job(self) -> SubmittedJob:
        return self.assignment.spec

    @property
    def host(self) -> str:
        return self.assignment.current_host


class Sidecar(ABC):
    """One sidecar of one host; see the module docstring for when each method is called."""

    #: A short name, for the host log and for errors ("checkpoints", "system-monitor").
    name: str = "sidecar"

    def prepare(self) -> None:
        """Downloading-phase work; raising fails the host with the error's message."""
        return None

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """Variables this sidecar sets in the script's environment, given the environment so
        far (to extend a variable such as ``PYTHONPATH`` rather than replace it)."""
        del env
        return {}

    @abstractmethod
    def start(self) -> None:
        """Begin the background work; the script starts right after."""

    def before_kill(self) -> None:
        """The script's processes are about to be killed (SIGKILL) while they still hold
        what they had open: note what they were writing. Quick, from the supervising thread."""
        return None

    def script_killed(self, signum: int, when: float) -> None:
        """A process of the script died of signal ``signum`` that the agent did not send, seen
        at Unix time ``when`` (one call per process so ended). The death closed every file it
        held open, half-written or not: note it. Quick, never raising; from the thread that
        watched the process, possibly while other processes of the script still run."""
        del signum, when

    @abstractmethod
    def finish(self) -> list[Artifact]:
        """The script has ended: finish the work, upload what is left, return the artifacts.

        Every metric value scraped from the script's output has reached the metric listeners
        by then.

        Also called on a sidecar that was never started (the job ended before its script
        began): upload what there is, or nothing."""

    def abort(self) -> None:
        """The agent is failing: stop the background work at once, uploading nothing more."""
        return None


#: Makes a job's sidecar, or None where the job does not ask for it.
SidecarFactory = Callable[[SidecarContext], "Sidecar | None"]
