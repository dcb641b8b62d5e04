"""How a followed job reads on a terminal: one line per log line and per status transition.

Shared by the CLI and ``TrainingJob.fit(logs=True)`` so both print the same thing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["format_log_line", "format_time", "format_transition"]


def format_log_line(line: dict[str, Any]) -> str:
    """``[algo-1] <text>``: every line carries the host it came from (``[algo-1 rank 3]``
    where the host ran several ranks)."""
    rank = line.get("rank")
    where = line.get("host", "?") if rank is None else f"{line.get('host', '?')} rank {rank}"
    return f"[{where}] {line.get('line', '')}"


def format_transition(transition: dict[str, Any]) -> str:
    """``<time> <Status>: <message>`` (the message is left out when there is none)."""
    when = format_time(transition.get("StartTime"))
    message = transition.get("StatusMessage")
    text = f"{when} {transition.get('Status', '?')}"
    return f"{text}: {message}" if message else text


def format_time(value: str | None) -> str:
    """An ISO 8601 time from the API as ``YYYY-MM-DD HH:MM:SS`` in UTC; ``-`` when absent."""
    if not value:
        return "-"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return value
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S")
