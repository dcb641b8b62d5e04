"""The tuning pages: every tuning job (``/ui/tuning``) and one tuning job (``/ui/tuning/{tuning}``):
its counts by status, the objective per trial with the best so far, the leaderboard of trials,
one slice per tuned parameter, parallel coordinates and parameter importance, live, with a stop
button while it runs.

Their data is the API's own: ``GET /api/v1/tuning-jobs`` (``TuningRoutes.list_tuning_jobs``),
``GET /api/v1/tuning-jobs/{name}`` (``describe``: status, counters, cost, best trial) and
``GET /api/v1/tuning-jobs/{name}/analysis`` (``analysis``: the figures ``trainops tuning report``
draws). The page draws that data as SVG (``_charts``) and computes nothing of its own.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote, urlencode

from trainops.server.ui._layout import csrf_field
from trainops.server.ui._page import PAGES, Page, PageRequest, UiError, esc
from trainops.server.ui.pages import _charts
from trainops.server.ui.pages._charts import Axis, number

__all__ = ["TUNING_JOBS_PAGE", "TUNING_PAGE"]

_STATUSES = ("InProgress", "Stopping", "Completed", "Stopped", "Failed")
_LIMITS = (25, 50, 100, 200)
_SHOWN_PARAMS = 12  # parallel coordinates and slices: the most important this many
_LEADERS = 100  # the leaderboard's rows; `trainops tuning export` has them all
_RUNNING = ("InProgress", "Stopping")
_STYLES = ("charts.css",)
_MOVING = "<span hidden data-moving></span>"  # ui.js: this part's figures move with time


def _link(name: str) -> str:
    return f'<a href="/ui/tuning/{esc(quote(name, safe=""))}">{esc(name)}</a>'


def _job_link(name: str) -> str:
    if "job" in PAGES:  # the job page, where one is registered
        return f'<a href="/ui/jobs/{esc(quote(name, safe=""))}">{esc(name)}</a>'
    return esc(name)


def _status(status: str) -> str:
    return f'<span class="status s-{esc(status.lower())}">{esc(status)}</span>'


def _time(stamp: str | None) -> str:
    text = (stamp or "").replace("T", " ")[:19]
    return f'<time datetime="{esc(stamp)}">{esc(text)}</time>' if stamp else ""


# --- the list --------------------------------------------------------------------------------


def _list_view(request: PageRequest) -> tuple[list[str], int]:
    statuses = list(dict.fromkeys(s for s in request.query_lists.get("status", ()) if s))
    for status in statuses:
        if status not in _STATUSES:
            raise UiError(f"status {status[:40]!r} is not one of {', '.join(_STATUSES)}")
    limit = request.query.get("limit", "50")
    if limit not in {str(n) for n in _LIMITS}:
        raise UiError(f"limit must be one of {', '.join(map(str, _LIMITS))}")
    return statuses, int(limit)


def render_list(request: PageRequest) -> str:
    statuses, limit = _list_view(request)
    query = urlencode([("status", s) for s in statuses] + [("limit", str(limit))])
    boxes = "".join(
        f'<label><input type="checkbox" name="status" value="{s}"'
        f"{' checked' if s in statuses else ''}> {s}</label>"
        for s in _STATUSES
    )
    limits = "".join(
        f'<option value="{n}"{" selected" if n == limit else ""}>{n}</option>' for n in _LIMITS
    )
    return (
        '<h1>Tuning jobs</h1><form class="filters" method="get" action="/ui/tuning">'
        f"<fieldset><legend>Status</legend>{boxes}</fieldset>"
        f'<label>Newest <select name="limit">{limits}</select></label>'
        '<button type="submit">Filter</button> <a href="/ui/tuning">Clear</a></form>'
        f'<div id="tuning-jobs" class="live" data-live="/ui/tuning/-/table?{esc(query)}"'
        ' data-topics="tuning">'
        f"{list_table(request)}</div>"
    )


def list_table(request: PageRequest) -> str:
    """The tuning jobs, newest first (the live part ``table``)."""
    statuses, limit = _list_view(request)
    found = request.ui.tuning.list_tuning_jobs(statuses, limit)["tuning_jobs"]
    rows = "".join(
        f'<tr data-tuning="{esc(t["HyperParameterTuningJobName"])}">'
        f'<td data-key="{esc(t["HyperParameterTuningJobName"])}">{_link(t["HyperParameterTuningJobName"])}</td>'
        f'<td data-key="{esc(t["HyperParameterTuningJobStatus"])}">{_status(t["HyperParameterTuningJobStatus"])}</td>'
        f'<td data-key="{esc(t["CreationTime"])}">{_time(t["CreationTime"])}</td>'
        f'<td data-key="{esc(t.get("HyperParameterTuningEndTime") or "")}">{_time(t.get("HyperParameterTuningEndTime"))}</td></tr>'
        for t in found
    )  # fmt: skip
    rows = rows or '<tr><td colspan="4" class="empty">No tuning jobs match.</td></tr>'
    return (
        '<table class="sortable"><thead><tr><th data-sort="name">Name</th>'
        '<th data-sort="status">Status</th><th data-sort="created">Created</th>'
        f'<th data-sort="ended">Ended</th></tr></thead><tbody>{rows}</tbody></table>'
        f'<nav class="pager"><span>{len(found)} shown</span></nav>'
    )


# --- one tuning job --------------------------------------------------------------------------


def render_one(request: PageRequest) -> str:
    name = request.params["tuning"]
    described = request.ui.tuning.describe(name)  # an unknown name: the API's 404
    # Live while it runs; an ended tuning job changes no more (its page is not refetched).
    live = f"/ui/tuning/{quote(name, safe='')}/-/body"
    running = described["HyperParameterTuningJobStatus"] in _RUNNING
    # Its trials are training jobs (``jobs``); its cost so far moves (``data-moving``).
    follow = f' class="live" data-live="{esc(live)}" data-topics="tuning jobs"' if running else ""
    return (
        f'<h1>Tuning job <span class="name">{esc(name)}</span></h1>'
        f'<div id="tuning"{follow}>{body(request)}</div>'
    )


def body(request: PageRequest) -> str:
    """Everything that changes while the tuning job runs (the live part ``body``)."""
    name = request.params["tuning"]
    described = request.ui.tuning.describe(name)
    analysis = request.ui.tuning.analysis(name)
    running = described["HyperParameterTuningJobStatus"] in _RUNNING
    return "".join(
        [
            _MOVING if running else "",  # its cost so far moves with time: redrawn every few s
            _summary(request, described, analysis),
            '<h2>Objective per trial</h2><div class="figure" id="objective">',
            _objective(analysis),
            "</div>",
            f'<h2>Leaderboard</h2><div id="leaderboard">{_leaderboard(analysis)}</div>',
            f'<h2>Parameter importance</h2><div class="figure" id="importance">{_importance(analysis)}</div>',
            f'<h2>Parallel coordinates</h2><div class="figure" id="parallel">{_parallel(analysis)}</div>',
            f'<h2>Slices</h2><div class="slices" id="slices">{_slices(analysis)}</div>',
        ]
    )  # fmt: skip


def _summary(request: PageRequest, described: dict[str, Any], analysis: dict[str, Any]) -> str:
    status = str(described["HyperParameterTuningJobStatus"])
    counts = described.get("TrainingJobStatusCounters") or {}
    objective = described.get("ObjectiveStatusCounters") or {}
    cells = "".join(
        f'<li><span class="count" data-count="{esc(k)}">{int(v)}</span> {esc(k)}</li>'
        for k, v in counts.items()
    )
    goal = f"{analysis['objective_type']} {analysis['metric_name']}"
    best = described.get("BestTrainingJob") or {}
    best_value = (best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}).get("Value")
    best_text = (
        f"{_job_link(str(best['TrainingJobName']))} = {esc(number(best_value))}"
        if best
        else "none yet"
    )
    cost = (described.get("Cost") or {}).get("EstimatedCostUsd")
    failure, done = described.get("FailureReason"), described.get("CompletionReason")
    reason = f'<p class="reason">{esc(failure)}</p>' if failure else ""
    reason += f'<p class="muted">Ended: {esc(done)}</p>' if done else ""
    return (
        f'<p class="summary">{_status(status)} · objective: <code>{esc(goal)}</code> · best: '
        f'<span id="best">{best_text}</span> · cost: {esc("" if cost is None else f"{cost:.4f}")} USD'
        f" {_stop(request, described)}</p>"
        + reason
        + f'<ul class="counts" id="counts">{cells}</ul>'
        f'<p class="muted">Objective: {int(objective.get("Succeeded", 0))} succeeded, '
        f'{int(objective.get("Pending", 0))} pending, {int(objective.get("Failed", 0))} failed.</p>'
    )  # fmt: skip


def _stop(request: PageRequest, described: dict[str, Any]) -> str:
    if described["HyperParameterTuningJobStatus"] != "InProgress":
        return ""
    name = str(described["HyperParameterTuningJobName"])
    return (
        f'<form method="post" action="/ui/tuning/{esc(quote(name, safe=""))}/-/stop" class="stop">'
        f'{csrf_field(request.csrf)}<button type="submit">Stop tuning job</button></form>'
    )


def stop(request: PageRequest) -> str:
    """Action ``stop``: ``POST /api/v1/tuning-jobs/{name}/stop``'s handler."""
    name = request.params["tuning"]
    request.ui.tuning.stop(name)
    return f"/ui/tuning/{quote(name, safe='')}"


def _scored(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in analysis["trials"] if _finite(t.get("objective"))]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _objective(analysis: dict[str, Any]) -> str:
    scored = _scored(analysis)
    points = [(float(t["number"]), float(t["objective"]), _tip(t)) for t in scored]
    line = [
        (float(t["number"]), float(t["best_so_far"]))
        for t in scored
        if _finite(t.get("best_so_far"))
    ]
    return _charts.points_and_line(points, line, x_label="trial", y_label=analysis["metric_name"],
                                   title=f"{analysis['metric_name']} per trial, best so far")  # fmt: skip


def _tip(trial: dict[str, Any]) -> str:
    values = ", ".join(f"{k}={v}" for k, v in sorted(trial["hyperparameters"].items()))
    return f"trial {trial['number']}: {number(trial.get('objective'))} ({values})"


def _ranked(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """Trials with an objective best first (ties by number), then the others by number."""
    sign = -1.0 if analysis["objective_type"] == "Maximize" else 1.0
    scored = sorted(_scored(analysis), key=lambda t: (sign * t["objective"], t["number"]))
    rest = [t for t in analysis["trials"] if not _finite(t.get("objective"))]
    return scored + rest


def _leaderboard(analysis: dict[str, Any]) -> str:
    params = sorted({k for t in analysis["trials"] for k in t["hyperparameters"]})
    heads = ["#", "trial", "training job", "status", analysis["metric_name"], *params,
             "seconds", "cost (USD)"]  # fmt: skip
    head = "".join(f'<th data-sort="{i}">{esc(h)}</th>' for i, h in enumerate(heads))
    rows = []
    ranked = _ranked(analysis)
    for rank, t in enumerate(ranked[:_LEADERS], 1):
        scored = _finite(t.get("objective"))
        cells = [
            (str(rank) if scored else "", str(rank) if scored else ""),
            (str(t["number"]), str(t["number"])),
            (t["training_job"], _job_link(t["training_job"])),
            (t["status"], _status(t["status"]) + (" <small>early stopped</small>" if t["early_stopped"] else "")),
            (str(t["objective"]) if scored else "", esc(number(t["objective"]) if scored else "")),
            *_values(t["hyperparameters"], params),
            (f"{t['seconds']:.1f}", esc(f"{t['seconds']:.0f}")),
            (f"{t['cost_usd']:.6f}", esc(f"{t['cost_usd']:.4f}")),
        ]  # fmt: skip
        tds = "".join(f'<td data-key="{esc(k)}">{v}</td>' for k, v in cells)
        rows.append(f'<tr data-trial="{int(t["number"])}">{tds}</tr>')
    body = "".join(rows) or f'<tr><td colspan="{len(heads)}" class="empty">No trials yet.</td></tr>'
    if len(ranked) > _LEADERS:
        body += (f'<tr><td colspan="{len(heads)}" class="empty">… {len(ranked) - _LEADERS} more'
                 " trials: <code>trainops tuning export</code> lists them all.</td></tr>")  # fmt: skip
    return f'<table class="sortable leaderboard"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _values(values: dict[str, Any], params: list[str]) -> list[tuple[str, str]]:
    """A trial's tuned values as leaderboard cells (sort key, text): numbers to 4 digits."""
    cells = []
    for name in params:
        value = values.get(name, "")
        shown = number(value) if isinstance(value, float) else str(value)
        cells.append((str(value), esc(shown)))
    return cells


def _importance(analysis: dict[str, Any]) -> str:
    items = [(str(i["parameter"]), float(i["importance"]), f"{i['importance']:.0%}")
             for i in analysis["importance"] if _finite(i.get("importance"))]  # fmt: skip
    note = f'<p class="muted">{esc(analysis.get("importance_method", ""))}; from {int(analysis["importance_trials"])} Completed trials.</p>'  # fmt: skip
    return _charts.bars(items, title="parameter importance") + note


def _axis_of(values: list[Any], scale: str) -> tuple[Axis, list[str]]:
    """An axis for a parameter's values: categories evenly spaced, numbers by their scale."""
    if scale == "Categorical" or any(isinstance(v, str) for v in values):
        categories = sorted({str(v) for v in values})
        return Axis(0.0, max(len(categories) - 1, 1)), categories
    return Axis.over([float(v) for v in values], log=scale == "Logarithmic"), []


def _position(value: Any, categories: list[str]) -> float | None:
    if categories:
        return float(categories.index(str(value))) if str(value) in categories else None
    return float(value) if isinstance(value, int | float) else None


def _slice_order(analysis: dict[str, Any]) -> list[dict[str, Any]]:
    """The slices, most important parameter first, at most ``_SHOWN_PARAMS``."""
    rank = {str(i["parameter"]): n for n, i in enumerate(analysis["importance"])}
    found = sorted(analysis["slices"], key=lambda s: (rank.get(str(s["parameter"]), 1 << 30), str(s["parameter"])))  # fmt: skip
    return found[:_SHOWN_PARAMS]


def _slices(analysis: dict[str, Any]) -> str:
    charts = []
    for found in _slice_order(analysis):
        name = str(found["parameter"])
        points = found["points"]
        if not points:
            continue
        axis, categories = _axis_of([p["value"] for p in points], str(found["scale"]))
        dots = [(pos, float(p["objective"]), f"trial {p['number']}: {name}={p['value']}")
                for p in points if (pos := _position(p["value"], categories)) is not None]  # fmt: skip
        chart = _charts.scatter(dots, x=axis, x_label=f"{name} ({found['scale']})",
                                y_label=analysis["metric_name"], title=f"{analysis['metric_name']} by {name}",
                                categories=categories)  # fmt: skip
        charts.append(f'<figure class="slice">{chart}</figure>')
    return "".join(charts) or '<p class="empty">No trial has an objective yet.</p>'


def _parallel(analysis: dict[str, Any]) -> str:
    scored = _scored(analysis)
    slices = {str(s["parameter"]): str(s["scale"]) for s in analysis["slices"]}
    names = [str(s["parameter"]) for s in _slice_order(analysis)]
    axes = []
    for name in names:
        values = [t["hyperparameters"][name] for t in scored if name in t["hyperparameters"]]
        if values:
            axes.append((name, *_axis_of(values, slices.get(name, ""))))
    objective = Axis.over([float(t["objective"]) for t in scored])
    axes.append((str(analysis["metric_name"]), objective, []))
    good = 1.0 if analysis["objective_type"] == "Maximize" else 0.0
    lines = []
    for t in scored:
        values = [_position(t["hyperparameters"].get(n), c) if n in t["hyperparameters"] else None
                  for n, _a, c in axes[:-1]]  # fmt: skip
        shade = 1.0 - abs(good - objective.share(float(t["objective"])))
        lines.append(([*values, float(t["objective"])], shade, _tip(t)))
    return _charts.parallel(axes, lines, title="parallel coordinates (darker: better)")


TUNING_JOBS_PAGE = Page(
    path="/ui/tuning",
    title="Tuning",
    render=render_list,
    nav=True,
    parts={"table": list_table},
)
TUNING_PAGE = Page(
    path="/ui/tuning/{tuning}",
    title="Tuning job",
    render=render_one,
    parts={"body": body},
    actions={"stop": stop},
    styles=_STYLES,
)
