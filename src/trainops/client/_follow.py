"""Following a job: long-poll its log, notice new status transitions, stop when it has ended.

:class:`JobFollower` keeps its place (log cursor, transitions already reported), so a caller
interrupted by Ctrl-C can ask the job to stop and resume following without repeating a line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainops.client._http import Client

__all__ = ["TERMINAL_STATUSES", "JobFollower", "follow"]

TERMINAL_STATUSES = frozenset({"Completed", "Failed", "Stopped"})
PAGE = 5000  # lines per long-poll (the server also caps a page at 8 MiB of text)

LineCallback = Callable[[dict[str, Any]], None]
TransitionCallback = Callable[[dict[str, Any]], None]


class JobFollower:
    """Streams one job's log lines and secondary transitions to callbacks."""

    def __init__(
        self,
        client: Client,
        name: str,
        on_line: LineCallback,
        on_transition: TransitionCallback | None = None,
        *,
        host: str | None = None,
        poll_wait: float = 10.0,
        on_page: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.name = name
        self.on_line = on_line
        self.on_transition = on_transition
        self.host = host
        self.poll_wait = poll_wait
        self.on_page = on_page  # after each page of lines (the CLI flushes its output there)
        self.cursor = 0
        self.reported = 0
        self._status: tuple[str, str] | None = None

    def follow(self) -> dict[str, Any]:
        """Report everything until the job's primary status is terminal; returns its description."""
        while True:
            reply = self.client.logs(
                self.name, after=self.cursor, host=self.host, limit=PAGE, wait=self.poll_wait
            )
            lines = reply.get("lines")
            status = (str(reply.get("TrainingJobStatus")), str(reply.get("SecondaryStatus")))
            # A quiet poll means the status moved (or the wait ran out): worth a describe.
            if status == self._status and lines:
                self._take(reply, [])
                continue
            self._status = status
            description = self.client.describe(self.name)
            self._take(reply, self._new_transitions(description))
            if description["TrainingJobStatus"] in TERMINAL_STATUSES:
                return self._finish(description)

    def check_transitions(self) -> dict[str, Any]:
        """Describe the job and report transitions not reported yet; returns the description."""
        description = self.client.describe(self.name)
        self._report([], self._new_transitions(description))
        return description

    def _new_transitions(self, description: dict[str, Any]) -> list[dict[str, Any]]:
        transitions: list[dict[str, Any]] = description.get("SecondaryStatusTransitions") or []
        new = transitions[self.reported :]
        self.reported = max(self.reported, len(transitions))
        return new

    def _take(self, reply: dict[str, Any], transitions: list[dict[str, Any]]) -> None:
        self._report(reply.get("lines") or [], transitions)
        self.cursor = max(self.cursor, int(reply.get("next", self.cursor)))
        if self.on_page is not None:
            self.on_page()

    def _report(self, lines: list[dict[str, Any]], transitions: list[dict[str, Any]]) -> None:
        """Report lines and transitions merged by time, so the output reads in order.

        Both carry ISO 8601 UTC times of one clock (a host's, for log lines and phase changes);
        at equal times a transition goes first.
        """
        merged = sorted(
            [(str(t.get("StartTime") or ""), 0, i) for i, t in enumerate(transitions)]
            + [(str(ln.get("timestamp") or ""), 1, i) for i, ln in enumerate(lines)]
        )
        for _time, kind, index in merged:
            if kind == 0:
                self._transitions([transitions[index]])
            else:
                self.on_line(lines[index])
                self.cursor = max(self.cursor, int(lines[index].get("cursor", self.cursor)))

    def _transitions(self, transitions: list[dict[str, Any]]) -> None:
        if self.on_transition is not None:
            for transition in transitions:
                self.on_transition(transition)

    def _finish(self, description: dict[str, Any]) -> dict[str, Any]:
        """The job has ended (as ``description`` says): drain the log, then report the last
        transitions; with nothing left to drain, ``description`` is already the last word."""
        drained = False
        while True:
            reply = self.client.logs(self.name, after=self.cursor, host=self.host, limit=PAGE)
            self._take(reply, [])
            if not reply.get("lines"):
                return self.check_transitions() if drained else description
            drained = True


def follow(
    client: Client,
    name: str,
    on_line: LineCallback,
    on_transition: TransitionCallback | None = None,
    *,
    host: str | None = None,
    poll_wait: float = 10.0,
) -> dict[str, Any]:
    """Follow job ``name`` until it ends; returns its final description."""
    return JobFollower(
        client, name, on_line, on_transition, host=host, poll_wait=poll_wait
    ).follow()
