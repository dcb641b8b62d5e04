"""Following a job: long-poll its log, notice new status transitions, stop when it has ended.

:class:`JobFollower` keeps its place (log cursor, transitions already reported), so a caller
interrupted by Ctrl-C can ask the job to stop and resume following without repeating a line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainops.client._http import Client, page_lines

__all__ = ["TERMINAL_STATUSES", "JobFollower", "follow"]

TERMINAL_STATUSES = frozenset({"Completed", "Failed", "Stopped"})
PAGE = 5000  # lines per long-poll (the server also caps a page at 8 MiB of text)

LineCallback = Callable[[dict[str, Any]], None]
LinesCallback = Callable[[list[dict[str, Any]]], None]
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
        on_lines: LinesCallback | None = None,
    ) -> None:
        self.client = client
        self.name = name
        self.on_line = on_line
        self.on_transition = on_transition
        self.host = host
        self.poll_wait = poll_wait
        self.on_page = on_page  # after each page of lines (the CLI flushes its output there)
        # Runs of lines at once (a page, or the lines between two transitions): a caller that
        # prints them writes a page in one call instead of a call per line.
        self.on_lines = on_lines
        self.cursor = 0
        self.reported = 0
        self._status: tuple[str, str] | None = None

    def follow(self) -> dict[str, Any]:
        """Report everything until the job's primary status is terminal; returns its description."""
        while True:
            reply = self.client.logs(
                self.name,
                after=self.cursor,
                host=self.host,
                limit=PAGE,
                wait=self.poll_wait,
                runs=True,
            )
            lines = page_lines(reply)
            status = (str(reply.get("TrainingJobStatus")), str(reply.get("SecondaryStatus")))
            # A quiet poll means the status moved (or the wait ran out): worth a describe.
            if status == self._status and lines:
                self._take(reply, lines, [])
                continue
            self._status = status
            description = self.client.describe(self.name)
            self._take(reply, lines, self._new_transitions(description))
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

    def _take(
        self,
        reply: dict[str, Any],
        lines: list[dict[str, Any]],
        transitions: list[dict[str, Any]],
    ) -> None:
        self._report(lines, transitions)
        self.cursor = max(self.cursor, int(reply.get("next", self.cursor)))
        if self.on_page is not None:
            self.on_page()

    def _report(self, lines: list[dict[str, Any]], transitions: list[dict[str, Any]]) -> None:
        """Report lines and transitions merged by time, so the output reads in order.

        Both carry ISO 8601 UTC times of one clock (a host's, for log lines and phase changes);
        at equal times a transition goes first. Lines come in cursor order and keep it.
        """
        start = 0
        for transition in sorted(transitions, key=lambda t: str(t.get("StartTime") or "")):
            when = str(transition.get("StartTime") or "")
            end = start
            while end < len(lines) and str(lines[end].get("timestamp") or "") < when:
                end += 1
            self._lines(lines[start:end])
            self._transitions([transition])
            start = end
        self._lines(lines[start:] if start else lines)

    def _lines(self, lines: list[dict[str, Any]]) -> None:
        if not lines:
            return
        if self.on_lines is not None:
            self.on_lines(lines)
        else:
            for line in lines:
                self.on_line(line)
        self.cursor = max(self.cursor, int(lines[-1].get("cursor", self.cursor)))

    def _transitions(self, transitions: list[dict[str, Any]]) -> None:
        if self.on_transition is not None:
            for transition in transitions:
                self.on_transition(transition)

    def _finish(self, description: dict[str, Any]) -> dict[str, Any]:
        """The job has ended (as ``description`` says): drain the log, then report the last
        transitions; with nothing left to drain, ``description`` is already the last word."""
        drained = False
        while True:
            reply = self.client.logs(
                self.name, after=self.cursor, host=self.host, limit=PAGE, runs=True
            )
            lines = page_lines(reply)
            self._take(reply, lines, [])
            if not lines:
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
