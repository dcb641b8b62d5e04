"""What a web UI page is: :class:`Page` (its path, title, renderer, live parts and actions), the
request a renderer gets (:class:`PageRequest`), what it reads through (:class:`UiContext`) and
the registry of pages (:data:`PAGES`).

A page renders on the server, from the same route handlers the JSON API answers with
(``UiContext.jobs`` is the API's own :class:`~trainops.server.routes.JobRoutes`, and so on):
the UI has no second way to read the store. Everything a renderer writes from data is escaped
with :func:`esc`; markup it writes itself is a plain string. docs/internals/ui-pages.md says how
to add a page.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from trainops._errors import TrainopsError
from trainops._registry import Registry
from trainops._settings import Settings
from trainops.control import JobController
from trainops.server._events import ChangeFeed
from trainops.server._longpoll import LogWaiter
from trainops.server.routes import (
    ClusterRoutes,
    EventRoutes,
    JobOutputRoutes,
    JobRoutes,
    ReportRoutes,
    StudyRoutes,
    TuningRoutes,
)

__all__ = ["PAGES", "Page", "PageRequest", "UiContext", "UiError", "esc"]


def esc(value: object) -> str:
    """``value`` as text in HTML (element content or a quoted attribute): ``<&>"'`` escaped;
    ``None`` is the empty string."""
    return "" if value is None else html.escape(str(value), quote=True)


class UiError(TrainopsError):
    """A page, part or action cannot answer (a bad query value, an unknown page): shown to the
    user as one line with ``status``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class UiContext:
    """What pages read through: the API's own route groups around the server's controller (and
    ``events``, the change stream the live pages follow)."""

    controller: JobController
    settings: Settings
    jobs: JobRoutes
    output: JobOutputRoutes
    reports: ReportRoutes
    tuning: TuningRoutes
    studies: StudyRoutes
    cluster: ClusterRoutes
    events: EventRoutes

    @classmethod
    def build(
        cls, controller: JobController, settings: Settings, waiter: LogWaiter, feed: ChangeFeed
    ) -> UiContext:
        return cls(
            controller=controller,
            settings=settings,
            jobs=JobRoutes(controller, settings),
            output=JobOutputRoutes(controller, waiter),
            reports=ReportRoutes(controller, settings),
            tuning=TuningRoutes(controller),
            studies=StudyRoutes(controller),
            cluster=ClusterRoutes(controller, settings),
            events=EventRoutes(feed),
        )


@dataclass(frozen=True)
class PageRequest:
    """One request to a page, a part or an action.

    ``params`` are the page path's ``{name}`` values; ``query`` the URL's query (last value of a
    repeated name; ``query_lists`` has them all); ``form`` an action's form fields; ``csrf`` the
    session's CSRF token, which every form that changes state carries as ``csrf``
    (:func:`~trainops.server.ui.csrf_field` writes it); ``path`` the path asked for.
    """

    ui: UiContext
    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    query_lists: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    form: Mapping[str, str] = field(default_factory=dict)
    csrf: str = ""


Render = Callable[[PageRequest], str]
Act = Callable[[PageRequest], str]
Wait = Callable[[PageRequest], Awaitable[None]]


@dataclass(frozen=True)
class Page:
    """One page of the web UI.

    ``path`` is under ``/ui`` and may hold ``{name}`` parameters (``/ui/jobs/{job}``: a
    parameter called ``job`` is a job's name, which the conformance test fills in). ``render``
    returns the page's main content as HTML (the layout adds the head, navigation and scripts);
    ``nav`` puts ``title`` in the navigation bar (pages without parameters only). ``parts`` are
    HTML fragments served at ``{path}/-/{part}`` (with the page's query) that ``ui.js`` refreshes
    live: an element ``<... data-live="{url}" data-topics="jobs">`` is fetched again whenever
    the change stream says one of its topics changed (the store's commit topics), and replaced
    by the part's content when that differs. ``actions`` are state changes, POSTed as forms to ``{path}/-/{action}`` with the
    session's CSRF token; an action returns the URL to go to next. ``waits`` are optional
    long-polls of parts (by the part's name): awaited on the server's event loop before the part
    renders, so a follower waiting for news holds no worker thread. ``tags`` may give a part a
    cheap fingerprint (any text that changes whenever the part's content would): the site
    answers a refresh whose ETag matches it with a 304 without rendering the part at all (a part
    without one is rendered and its content hashed). ``scripts`` and ``styles`` name further
    files of ``static/`` the page needs.
    """

    path: str
    title: str
    render: Render
    nav: bool = False
    parts: Mapping[str, Render] = field(default_factory=dict)
    actions: Mapping[str, Act] = field(default_factory=dict)
    waits: Mapping[str, Wait] = field(default_factory=dict)
    tags: Mapping[str, Render] = field(default_factory=dict)
    scripts: tuple[str, ...] = ()
    styles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.path.startswith("/ui/") or "/-/" in self.path or self.path.endswith("/"):
            raise ValueError(f"page path {self.path!r}: must be /ui/<name>[/...], without /-/")
        if set(self.tags) - set(self.parts):
            raise ValueError(f"page path {self.path!r}: a tag of no part: {sorted(self.tags)}")
        if self.nav and "{" in self.path:
            raise ValueError(f"page path {self.path!r}: a page with parameters is not in the nav")


#: Every page of the web UI, by name (``"jobs"``); registered in ``pages/__init__.py``.
PAGES: Registry[Page] = Registry("web UI page", error=lambda m: UiError(m, 404))
