"""Rule command actions run on a job's own host: the control plane's side.

A rule's command action (``trainops.actions``) is code the job's submitter chose: while the
job's first host runs, it runs there, as the job's processes run (in the host's namespaces,
with the job's environment), never on the control plane. :meth:`HostActions.open` queues it
for that host; the host's agent finds it among the commands of its next report replies (sent
again until it reports back, so a lost reply loses nothing; the agent runs each ``action_id``
once) and reports how it went as an ``action`` event, which :meth:`HostActions.finish` takes:
only from the host it was sent to, in the attempt it was sent to. The rules service waits for
that (:meth:`HostAction.wait`). Nothing here runs a command.

Actions live in memory: one is needed only while its rule's evaluation waits for it. A control
plane that stops meanwhile loses them; the rule's row says its finding's actions have not been
recorded yet (``trainops.rules._tracking``), and the next control plane runs them again. An
action's id is derived from what it is (job, attempt, host, command, input, variables: the
finding's time is in its input), so the action sent again has the id the host has seen, and an
agent that ran it already reports that run again rather than running it twice
(``trainops.agent.supervision._actions``). Identical actions of one finding therefore run once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from trainops.protocol import Command

__all__ = ["MAX_OPEN_ACTIONS", "OUTPUT_LIMIT", "HostAction", "HostActions", "make_action_id"]

MAX_OPEN_ACTIONS = 64  # unfinished host actions of one job at a time
OUTPUT_LIMIT = 400  # characters of a command's output kept in its result


@dataclass(slots=True)
class HostAction:
    """One command action sent to one host, and how it went."""

    action_id: str
    job: str
    attempt: int
    host: str
    command: Command
    delivered: bool = False
    outcome: dict[str, Any] | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def wait(self, seconds: float) -> bool:
        """Whether the host has reported how it went (waiting at most ``seconds``)."""
        return self.done.wait(seconds)


class HostActions:
    """The host actions of every running job, keyed by id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._actions: dict[str, HostAction] = {}

    def open(
        self,
        job: str,
        attempt: int,
        host: str,
        argv: list[str],
        stdin: str,
        variables: dict[str, str],
        timeout: float,
    ) -> HostAction:
        """Queue ``argv`` for ``host`` of ``job``'s ``attempt``; its id is :func:`make_action_id`."""
        action_id = make_action_id(job, attempt, host, argv, stdin, variables)
        command = Command(
            kind="action",
            action_id=action_id,
            words=list(argv),
            stdin=stdin,
            variables=dict(variables),
            timeout_seconds=timeout,
        )
        action = HostAction(action_id, job, attempt, host, command)
        with self._lock:
            if sum(1 for a in self._actions.values() if a.job == job) >= MAX_OPEN_ACTIONS:
                raise ValueError(f"job {job!r} already has {MAX_OPEN_ACTIONS} unfinished actions")
            if action_id in self._actions:
                raise ValueError(f"the same action is already waiting for host {host}")
            self._actions[action_id] = action
        return action

    def commands_for(self, job: str, attempt: int, host: str) -> list[Command]:
        """The actions ``host`` has not reported yet (marked as delivered)."""
        with self._lock:
            waiting = [
                a
                for a in self._actions.values()
                if (a.job, a.attempt, a.host) == (job, attempt, host) and a.outcome is None
            ]
            for action in waiting:
                action.delivered = True
        return [a.command for a in waiting]

    def finish(self, job: str, attempt: int, host: str, data: dict[str, Any]) -> None:
        """An ``action`` event of ``host``: the outcome of one of its own actions (others'
        and unknown ids are ignored)."""
        with self._lock:
            action = self._actions.get(str(data.get("action_id", "")))
            if action is None or (action.job, action.attempt, action.host) != (job, attempt, host):
                return
            if action.outcome is None:
                action.outcome = dict(data)
        action.done.set()

    def waiting(self, job: str) -> list[HostAction]:
        """The actions of ``job`` whose waiters have not closed them yet."""
        with self._lock:
            return [a for a in self._actions.values() if a.job == job]

    def close(self, action: HostAction) -> bool:
        """Forget ``action`` (its waiter is done with it); whether a host was sent it."""
        with self._lock:
            self._actions.pop(action.action_id, None)
            return action.delivered


def make_action_id(
    job: str, attempt: int, host: str, argv: list[str], stdin: str, variables: dict[str, str]
) -> str:
    """The id of an action: the same for the same action sent again (by a restarted control
    plane), another for any other."""
    what = json.dumps([job, attempt, host, argv, stdin, variables], sort_keys=True)
    return hashlib.sha256(what.encode()).hexdigest()[:16]
