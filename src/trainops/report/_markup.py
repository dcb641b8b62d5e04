"""Small pieces of the report page's markup: escaping, number and time formats, tables."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

__all__ = ["e", "missing", "number", "table", "when"]


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:.{digits}g}"
    return e(value)


def when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def table(header: list[str], rows: list[list[str]]) -> str:
    """A table; cells are already escaped markup (first column left-aligned)."""
    head = "".join(f'<th class="{"l" if i == 0 else ""}">{e(h)}</th>' for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i == 0 else ""}">{c}</td>' for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )  # fmt: skip
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def missing(section: dict[str, Any]) -> str:
    return f'<p class="none">{e(section.get("reason", "no data"))}</p>'
