"""The HTML around every page (head, navigation, scripts) and the headers every UI answer has:
a strict Content-Security-Policy (nothing but this server's own files: no inline script or
style, no other origin), no framing, no sniffing, no caching, no referrer to other sites."""

from __future__ import annotations

from collections.abc import Iterable

from trainops._version import __version__
from trainops.server.ui._page import PAGES, esc

__all__ = ["CSP", "SECURITY_HEADERS", "csrf_field", "layout", "static_url"]

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make a form's Origin "null"
    "Cache-Control": "no-store",
}
BASE_STYLES = ("ui.css",)
BASE_SCRIPTS = ("ui.js",)


def static_url(name: str) -> str:
    """The URL of a file of ``static/`` (versioned, so a new release is fetched anew)."""
    return f"/ui/static/{esc(name)}?v={esc(__version__)}"


def csrf_field(token: str) -> str:
    """The hidden input every state-changing form carries (checked with the session's)."""
    return f'<input type="hidden" name="csrf" value="{esc(token)}">'


def layout(
    title: str,
    body: str,
    *,
    current: str = "",
    scripts: Iterable[str] = (),
    styles: Iterable[str] = (),
    signed_in: bool = True,
    events: tuple[str, str] | None = None,
) -> str:
    """A whole page: ``body`` (trusted markup) under the navigation bar; ``title`` is text.
    ``events`` is the change stream's URL and the cursor of when the page was read, which
    ``ui.js`` follows to refresh the page's live parts."""
    links = "".join(
        f'<link rel="stylesheet" href="{static_url(s)}">' for s in (*BASE_STYLES, *styles)
    )
    js = "".join(
        f'<script src="{static_url(s)}" defer></script>' for s in (*BASE_SCRIPTS, *scripts)
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="{static_url("favicon.svg")}">'
        f"<title>{esc(title)} · trainops</title>{links}{js}</head><body{_follow(events)}>"
        f"{_nav(current) if signed_in else _bare_nav()}"
        f'<main id="main">{body}</main></body></html>'
    )


def _follow(events: tuple[str, str] | None) -> str:
    if events is None:
        return ""
    url, cursor = events
    return f' data-events="{esc(url)}" data-cursor="{esc(cursor)}"'


def _nav(current: str) -> str:
    items = []
    for name in PAGES:
        page = PAGES[name]
        if page.nav:
            mark = ' aria-current="page"' if name == current else ""
            items.append(f'<a href="{esc(page.path)}"{mark}>{esc(page.title)}</a>')
    return f'<nav class="top"><a class="brand" href="/">trainops</a>{"".join(items)}</nav>'


def _bare_nav() -> str:
    return '<nav class="top"><span class="brand">trainops</span></nav>'
