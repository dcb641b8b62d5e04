"""The study pages: every scaling study (``/ui/studies``) and one study (``/ui/studies/{study}``):
a table of its configurations (world, samples/s, efficiency, time to target, billable time,
cost, status, job) and throughput against world size next to perfect scaling, live while the
study runs.

Their data is the API's own: ``GET /api/v1/studies`` (``StudyRoutes.list_studies``) and
``GET /api/v1/studies/{name}`` (``describe_study``), which ``trainops study`` records as it runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from trainops.server.ui._page import PAGES, Page, PageRequest, esc
from trainops.server.ui.pages import _charts
from trainops.server.ui.pages._charts import number

__all__ = ["STUDIES_PAGE", "STUDY_PAGE"]

_STYLES = ("charts.css",)


def _link(name: str) -> str:
    return f'<a href="/ui/studies/{esc(quote(name, safe=""))}">{esc(name)}</a>'


def _job_link(name: str | None) -> str:
    if name and "job" in PAGES:  # the job page, where one is registered
        return f'<a href="/ui/jobs/{esc(quote(name, safe=""))}">{esc(name)}</a>'
    return esc(name)


def _status(status: str) -> str:
    return f'<span class="status s-{esc(status.lower())}">{esc(status)}</span>'


def _time(stamp: float) -> str:
    when = datetime.fromtimestamp(stamp, UTC).isoformat()
    return f'<time datetime="{esc(when)}">{esc(when[:19].replace("T", " "))}</time>'


# --- the list --------------------------------------------------------------------------------


def render_list(request: PageRequest) -> str:
    return (
        '<h1>Scaling studies</h1><p class="muted">Recorded by <code>trainops study</code>.</p>'
        f'<div id="studies" class="live" data-live="/ui/studies/-/table" data-topics="studies">{list_table(request)}</div>'
    )  # fmt: skip


def list_table(request: PageRequest) -> str:
    """The studies, newest first (the live part ``table``)."""
    found = request.ui.studies.list_studies(limit=200)["studies"]
    rows = "".join(
        f'<tr data-study="{esc(s["name"])}"><td data-key="{esc(s["name"])}">{_link(s["name"])}</td>'
        f'<td>{esc(s["title"])}</td><td data-key="{esc(s["status"])}">{_status(s["status"])}</td>'
        f'<td data-key="{len(s["rows"])}">{len(s["rows"])}</td>'
        f'<td data-key="{s["creation_time"]}">{_time(s["creation_time"])}</td></tr>'
        for s in found
    )  # fmt: skip
    rows = rows or '<tr><td colspan="5" class="empty">No studies yet.</td></tr>'
    return (
        '<table class="sortable"><thead><tr><th data-sort="name">Name</th><th>Study</th>'
        '<th data-sort="status">Status</th><th data-sort="configurations">Configurations</th>'
        f'<th data-sort="created">Started</th></tr></thead><tbody>{rows}</tbody></table>'
    )


# --- one study -------------------------------------------------------------------------------


def render_one(request: PageRequest) -> str:
    name = request.params["study"]
    study = request.ui.studies.describe_study(name)  # an unknown name: the API's 404
    live = f"/ui/studies/{quote(name, safe='')}/-/body"
    follow = (
        f' class="live" data-live="{esc(live)}" data-topics="studies"'
        if study["status"] == "InProgress"
        else ""
    )
    return (
        f'<h1>Study <span class="name">{esc(name)}</span></h1>'
        f'<div id="study"{follow}>{_body(study)}</div>'
    )


def body(request: PageRequest) -> str:
    """Everything that changes while the study runs (the live part ``body``)."""
    return _body(request.ui.studies.describe_study(request.params["study"]))


def _body(study: dict[str, Any]) -> str:
    target = study["target_metric"]
    return (
        f'<p class="summary">{_status(study["status"])} · {esc(study["title"])}'
        f" · started {_time(study['creation_time'])}</p>"
        f'<h2>Configurations</h2><div id="configurations">{_table(study["rows"], target)}</div>'
        f'<h2>Throughput by world size</h2><div class="figure" id="scaling">{_plot(study)}</div>'
    )


def _table(rows: list[dict[str, Any]], target: str | None) -> str:
    head = ["configuration", "world", "samples/s", "efficiency", f"time to {target or '-'} (s)",
            "billable (s)", "cost (USD)", "status", "job"]  # fmt: skip
    body = "".join(
        f'<tr data-row="{i}"><td>{esc(r["label"])}</td>'
        f'<td>{r["instance_count"] * r["processes_per_host"]}</td>'
        f'<td>{esc(number(r["throughput"]))}</td><td>{_share(r["efficiency"])}</td>'
        f'<td>{esc(number(r["time_to_target_s"]))}</td>'
        f'<td>{esc(number(r["billable_seconds"]))}</td><td>{_usd(r["cost_usd"])}</td>'
        f'<td>{_status(r["status"])}</td><td>{_job_link(r["job_name"])}</td></tr>'
        for i, r in enumerate(rows)
    )  # fmt: skip
    body = body or f'<tr><td colspan="{len(head)}" class="empty">No configurations yet.</td></tr>'
    cells = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _usd(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _plot(study: dict[str, Any]) -> str:
    measured = [r for r in study["rows"] if r["throughput"]]
    points = [(float(_world(r)), float(r["throughput"]), _tip(r)) for r in measured]
    # Perfect scaling of the smallest measured world: each row's throughput over its efficiency.
    ideal = sorted((float(_world(r)), r["throughput"] / r["efficiency"])
                   for r in measured if r["efficiency"])  # fmt: skip
    return _charts.scaling(points, ideal, x_label="world size (processes)", y_label="samples/s",
                           title=f"{study['title']} (dashed: perfect scaling)")  # fmt: skip


def _world(row: dict[str, Any]) -> int:
    return int(row["instance_count"]) * int(row["processes_per_host"])


def _tip(row: dict[str, Any]) -> str:
    return f"{row['label']}: {number(row['throughput'])} samples/s, {_share(row['efficiency'])}"


STUDIES_PAGE = Page(
    path="/ui/studies",
    title="Studies",
    render=render_list,
    nav=True,
    parts={"table": list_table},
)
STUDY_PAGE = Page(
    path="/ui/studies/{study}",
    title="Study",
    render=render_one,
    parts={"body": body},
    styles=_STYLES,
)
