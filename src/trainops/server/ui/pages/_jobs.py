"""The jobs page (``/ui/jobs``): every job with its status, times, instances, cost and final
metrics; filtered by status and name, paged on the server, refreshed live, with a stop button
for each running job.

Its rows come from the API's own handler: ``GET /api/v1/jobs?include=Cost&include=
FinalMetricDataList`` (``JobRoutes.list_jobs``, the store's indexed listing, newest first or
sorted by name, status or creation time in either direction: the column headers are links, with
the page's cost and final metrics read at once: two queries a page, no describe per row). Pages
are keyset-paged (``after``: the listing's ``next`` cursor), so the 200th page costs what the
first does, in every order. The table follows the change stream's ``jobs`` topic (``ui.js``).
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from trainops.control import PrimaryStatus
from trainops.server.routes import JOB_DIRECTIONS, parse_cursor
from trainops.server.ui._layout import csrf_field
from trainops.server.ui._page import PAGES, Page, PageRequest, UiError, esc

__all__ = ["JOBS_PAGE", "PAGE_SIZES"]

PAGE_SIZES = (25, 50, 100, 200)
_STATUSES = tuple(s.value for s in PrimaryStatus)
_STOPPABLE = (PrimaryStatus.IN_PROGRESS.value,)
_ACTIVE = (PrimaryStatus.IN_PROGRESS.value, PrimaryStatus.STOPPING.value)
_MAX_NAME = 200
_MAX_REASON = 300
_METRICS_SHOWN = 3
_COLUMNS = (
    ("name", "Name"),
    ("status", "Status"),
    ("created", "Created"),
    ("", "Duration"),
    ("", "Instances"),
    ("", "Cost (USD)"),
    ("", "Final metrics"),
    ("", ""),
)  # fmt: skip  (a key: sorted on the server by that order of the listing)
_FIRST_DIRECTION = {"created": "desc", "name": "asc", "status": "asc"}


class _View:
    """The page's query, checked: statuses, name filter, order, page cursor and size."""

    def __init__(self, request: PageRequest) -> None:
        self.statuses = list(dict.fromkeys(s for s in request.query_lists.get("status", ()) if s))
        for status in self.statuses:
            if status not in _STATUSES:
                raise UiError(f"status {status[:40]!r} is not one of {', '.join(_STATUSES)}")
        self.name = request.query.get("name", "").strip()[:_MAX_NAME]
        self.order = request.query.get("order", "created")
        if self.order not in _FIRST_DIRECTION:
            raise UiError(f"order {self.order[:40]!r} is not one of {', '.join(_FIRST_DIRECTION)}")
        self.direction = request.query.get("direction", _FIRST_DIRECTION[self.order])
        if self.direction not in JOB_DIRECTIONS:
            raise UiError(f"direction must be one of {', '.join(JOB_DIRECTIONS)}")
        self.after = request.query.get("after", "")
        try:
            self.cursor = parse_cursor(self.after)
        except ValueError as exc:
            raise UiError(f"after: {exc}") from None
        size = request.query.get("size", "50")
        if size not in {str(s) for s in PAGE_SIZES}:
            raise UiError(f"size must be one of {', '.join(map(str, PAGE_SIZES))}")
        self.size = int(size)

    def query(self, *, after: str | None = None, order: str | None = None) -> str:
        """This view's URL query (with another cursor; in another order, from its start)."""
        pairs = [("status", s) for s in self.statuses]
        pairs += [("name", self.name)] if self.name else []
        if order is not None:  # a header: its order, the other way round when it is this one
            again = order == self.order and self.direction == _FIRST_DIRECTION[order]
            flip = {"asc": "desc", "desc": "asc"}
            direction, cursor = flip[_FIRST_DIRECTION[order]] if again else "", ""
        else:
            order, direction = self.order, self.direction
            cursor = self.after if after is None else after
        pairs += [("order", order)] if order != "created" else []
        pairs += (
            [("direction", direction)] if direction not in ("", _FIRST_DIRECTION[order]) else []
        )
        pairs += [("after", cursor)] if cursor else []
        pairs += [("size", str(self.size))] if self.size != 50 else []
        return urlencode(pairs)


def render(request: PageRequest) -> str:
    view = _View(request)
    live = f"/ui/jobs/-/table?{view.query()}"
    return (
        f"<h1>Training jobs</h1>{_filters(view)}"
        f'<div id="jobs" class="live" data-live="{esc(live)}" data-topics="jobs">'
        f"{table(request)}</div>"
    )


def table(request: PageRequest) -> str:
    """The table and its pager (the live part ``table``)."""
    view = _View(request)
    listed = _listing(request, view, include=["Cost", "FinalMetricDataList"])
    shown = listed["jobs"]
    rows = "".join(_row(request, job) for job in shown)
    if not rows:
        rows = f'<tr><td colspan="{len(_COLUMNS)}" class="empty">No jobs match.</td></tr>'
    heads = "".join(_head(view, key, label) for key, label in _COLUMNS)
    # A running job's duration and cost so far move with time: ui.js redraws such a table
    # every few seconds as well as on each change.
    moving = " data-moving" if any(j["TrainingJobStatus"] in _ACTIVE for j in shown) else ""
    return (
        f'<table class="jobs"{moving}><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody>'
        f"</table>{_pager(view, listed.get('next'), len(shown))}"
    )


def table_tag(request: PageRequest) -> str:
    """The table's fingerprint (its live refresh's ETag): the page's listing, one indexed query,
    no describe. A page of ended jobs changes only when the listing does (a new job, a status);
    while one of its jobs is active (its duration and cost "so far" move), every second and
    every change the controller counts (a metric arriving)."""
    listed = _listing(request, _View(request))
    active = any(j["TrainingJobStatus"] in _ACTIVE for j in listed["jobs"])
    moving = [request.ui.controller.change_version, int(time.time())] if active else []
    return json.dumps([listed, moving, request.csrf], sort_keys=True, default=str)


def _listing(request: PageRequest, view: _View, include: list[str] | None = None) -> dict[str, Any]:
    """``GET /api/v1/jobs`` for the view: its page of jobs and the cursor of the next."""
    return request.ui.jobs.list_jobs(
        status=view.statuses,
        name_contains=view.name or None,
        created_after=None,
        created_before=None,
        limit=view.size,
        order=view.order,
        direction=view.direction,
        after=view.cursor,
        include=include,
    )


def _head(view: _View, key: str, label: str) -> str:
    """A column's header: a link sorting by it (on the server) where the listing can."""
    if not key:
        return f"<th>{label}</th>"
    sort = ""
    if key == view.order:
        sort = ' aria-sort="descending"' if view.direction == "desc" else ' aria-sort="ascending"'
    link = f'<a href="/ui/jobs?{esc(view.query(order=key))}">{label}</a>'
    return f'<th data-order="{key}"{sort}>{link}</th>'


def _filters(view: _View) -> str:
    boxes = "".join(
        f'<label><input type="checkbox" name="status" value="{s}"'
        f"{' checked' if s in view.statuses else ''}> {s}</label>"
        for s in _STATUSES
    )
    sizes = "".join(
        f'<option value="{n}"{" selected" if n == view.size else ""}>{n}</option>'
        for n in PAGE_SIZES
    )
    return (
        '<form class="filters" method="get" action="/ui/jobs">'
        f'<input type="search" name="name" value="{esc(view.name)}" placeholder="name contains"'
        f' maxlength="{_MAX_NAME}" aria-label="name contains">'
        f"<fieldset><legend>Status</legend>{boxes}</fieldset>"
        f'<label>Per page <select name="size">{sizes}</select></label>'
        f"{_kept(view)}"
        '<button type="submit">Filter</button> <a href="/ui/jobs">Clear</a></form>'
    )


def _kept(view: _View) -> str:
    """The order, kept when the filters change (the cursor is not: a new filter starts over)."""
    kept = [("order", view.order), ("direction", view.direction)]
    return "".join(f'<input type="hidden" name="{k}" value="{esc(v)}">' for k, v in kept)


def _pager(view: _View, more: str | None, shown: int) -> str:
    first = f'<a href="/ui/jobs?{esc(view.query(after=""))}">First</a>' if view.after else ""
    older = f'<a rel="next" href="/ui/jobs?{esc(view.query(after=more))}">Next</a>' if more else ""
    return f'<nav class="pager"><span>{shown} shown</span> {first} {older}</nav>'


def _row(request: PageRequest, job: dict[str, Any]) -> str:
    name = str(job["TrainingJobName"])
    status = str(job["TrainingJobStatus"])
    cost = (job.get("Cost") or {}).get("EstimatedCostUsd")
    created = job.get("CreationTime") or ""
    cells = [
        (name, _name_cell(name)),
        (status, _status(job, status)),
        (created, f'<time datetime="{esc(created)}">{esc(created.replace("T", " ")[:19])}</time>'),
        *_duration(job),
        (_instances(job), esc(_instances(job))),
        ("" if cost is None else f"{cost:.6f}", "" if cost is None else f"{cost:.4f}"),
        ("", _metrics(job)),
    ]  # fmt: skip
    tds = "".join(f'<td data-key="{esc(key)}">{html}</td>' for key, html in cells)
    return f'<tr data-job="{esc(name)}">{tds}<td>{_stop(request, name, status)}</td></tr>'


def _status(job: dict[str, Any], status: str) -> str:
    reason = str(job.get("FailureReason") or "")
    cut = reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON] + "…"
    return (
        f'<span class="status s-{esc(status.lower())}">{esc(status)}</span>'
        f" <small>{esc(job.get('SecondaryStatus'))}</small>"
        + (f'<div class="reason">{esc(cut)}</div>' if reason else "")
    )


def _name_cell(name: str) -> str:
    if "job" in PAGES:  # the job page, where one is registered
        return f'<a href="/ui/jobs/{esc(quote(name, safe=""))}">{esc(name)}</a>'
    return esc(name)


def _duration(job: dict[str, Any]) -> list[tuple[str, str]]:
    """Created to ended (its end time, else its last change once it has ended); while it
    runs, created to now, "so far"."""
    start = job.get("CreationTime")
    if not start:
        return [("", "")]
    running = job.get("TrainingJobStatus") in _ACTIVE
    end = job.get("TrainingEndTime") or (None if running else job.get("LastModifiedTime"))
    began = datetime.fromisoformat(start)
    ended = datetime.fromisoformat(end) if end else datetime.now(began.tzinfo)
    seconds = max(0.0, (ended - began).total_seconds())
    return [(f"{seconds:012.3f}", _seconds(seconds) + ("" if end else " so far"))]


def _seconds(total: float) -> str:
    minutes, seconds = divmod(int(total), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def _instances(job: dict[str, Any]) -> str:
    return f"{job.get('InstanceType', '')} x {job.get('InstanceCount', '')}"


def _metrics(job: dict[str, Any]) -> str:
    metrics = job.get("FinalMetricDataList") or []
    shown = "".join(
        f"<li>{esc(m['MetricName'])} = {esc(_number(m['Value']))}</li>"
        for m in metrics[:_METRICS_SHOWN]
    )
    rest = len(metrics) - _METRICS_SHOWN
    more = f"<li>… {rest} more</li>" if rest > 0 else ""
    return f'<ul class="metrics">{shown}{more}</ul>' if shown else ""


def _number(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _stop(request: PageRequest, name: str, status: str) -> str:
    if status not in _STOPPABLE:
        return ""
    return (
        f'<form method="post" action="/ui/jobs/-/stop" class="stop">{csrf_field(request.csrf)}'
        f'<input type="hidden" name="job" value="{esc(name)}">'
        f'<button type="submit" aria-label="Stop {esc(name)}">Stop</button></form>'
    )


def stop(request: PageRequest) -> str:
    """Action ``stop``: ``POST /api/v1/jobs/{name}/stop``'s handler for the form's ``job``."""
    name = request.form.get("job", "")
    if not name:
        raise UiError("which job: the form has no job")
    request.ui.jobs.stop_job(name)
    return "/ui/jobs"


JOBS_PAGE = Page(
    path="/ui/jobs",
    title="Jobs",
    render=render,
    nav=True,
    parts={"table": table},
    tags={"table": table_tag},
    actions={"stop": stop},
)
