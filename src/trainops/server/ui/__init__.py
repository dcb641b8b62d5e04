"""The web UI served by ``trainops server`` on the API's own port: ``/`` and ``/ui/...``.

Pages render on the server from the API's own route handlers (``UiContext``), with a little
script of our own (``static/ui.js``: live parts, table sorting) and a strict
Content-Security-Policy; every file ships in the package. A browser signs in with a one-time
login link or the API token and then holds a session cookie (``UiAuth``); a form that changes
state carries the session's CSRF token. Each page is a :class:`Page` registered in
:data:`PAGES`; docs/internals/ui-pages.md says how to add one.
"""

from __future__ import annotations

from trainops.server.ui._auth import LINK_TTL_S, Session, UiAuth
from trainops.server.ui._layout import CSP, csrf_field, layout, static_url
from trainops.server.ui._page import PAGES, Page, PageRequest, UiContext, UiError, esc
from trainops.server.ui._site import UiSite
from trainops.server.ui.pages import CLUSTER_PAGE, JOBS_PAGE, TUNING_JOBS_PAGE, TUNING_PAGE

__all__ = [
    "CLUSTER_PAGE",
    "CSP",
    "JOBS_PAGE",
    "LINK_TTL_S",
    "PAGES",
    "TUNING_JOBS_PAGE",
    "TUNING_PAGE",
    "Page",
    "PageRequest",
    "Session",
    "UiAuth",
    "UiContext",
    "UiError",
    "UiSite",
    "csrf_field",
    "esc",
    "layout",
    "static_url",
]
