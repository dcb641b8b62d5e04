"""A job's page (``/ui/jobs/{job}``): its status and status timeline, failure reason, hosts and
ranks, cost, hyperparameters, spec (as YAML), every metric as a chart, its log (followed live or
paged, filtered by host, rank and stream, searched), the profiler's utilization timelines, the
profiler and debugger rules' verdicts with their evidence, its artifacts (the model and output
archives with a download link: ``ui/_artifacts``), its checkpoints with their sync state, its
cost and checkpoint advice, and a stop button.

Everything comes from the API's own handlers: ``GET /api/v1/jobs/{name}`` (``describe_job``),
``GET /jobs/{name}/metric-series`` (each metric downsampled on the server: min, max and last per
pixel), ``GET /jobs/{name}/logs`` (``tail`` to follow the end, ``after`` to page; never the whole
log), ``GET /jobs/{name}/profiler-report`` (its timelines), ``GET /jobs/{name}/checkpoints`` and ``GET
/jobs/{name}/cost``. The
status and metrics are live parts that ``ui.js`` refreshes; the log, while followed, is
long-polled by ``job.js`` (``wait``: the part answers when a line after ``since`` arrives,
through the logs route's own long-poll), so a new line shows in well under a second.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote, urlencode

import anyio.from_thread
import yaml

from trainops.server._http import ApiError
from trainops.server.ui._artifacts import DOWNLOADABLE, artifact_url
from trainops.server.ui._layout import csrf_field
from trainops.server.ui._page import Page, PageRequest, UiError, esc
from trainops.server.ui.pages._chart import band_chart, lines_chart

__all__ = ["JOB_PAGE", "LOG_PAGE_LINES"]

LOG_PAGE_LINES = 200
"""Lines a log view shows at most (the tail it follows, or a page)."""
_SCAN_PAGES = 20  # a filtered page reads at most this many pages of 1000 lines to fill itself
_STREAMS = ("stdout", "stderr", "agent")
_MAX_SEARCH = 200
_MAX_WAIT = 25  # seconds a follower's long-poll of the log part may wait for a line
_ENDED = ("Completed", "Failed", "Stopped")
_CHART_WIDTH = 600
# The live parts follow the change stream (ui.js): the overview on a change of any job's record,
# hosts or output (its final metrics), the charts on output; each redrawn at most every 1.5 s
# (the charts cost the most to draw).
_FOLLOW_OVERVIEW = 'data-topics="jobs hosts output" data-live-gap="1500"'
_FOLLOW_METRICS = 'data-topics="output" data-live-gap="1500"'
_MOVING = "<span hidden data-moving></span>"  # ui.js: this part's figures move with time
_DYNAMIC = {
    "TrainingJobStatus", "SecondaryStatus", "FailureReason", "CreationTime", "TrainingStartTime",
    "TrainingEndTime", "LastModifiedTime", "SecondaryStatusTransitions", "ModelArtifacts",
    "Artifacts", "FinalMetricDataList", "TrainingTimeInSeconds", "BillableTimeInSeconds", "Cost",
    "Attempt", "Hosts", "ProfilerRuleEvaluationStatuses", "DebugRuleEvaluationStatuses",
}  # fmt: skip


class _LogView:
    """The log's query, checked: host, stream, rank, search text, and a cursor (none: follow)."""

    def __init__(self, request: PageRequest) -> None:
        query = request.query
        self.host = query.get("host", "")[:100]
        self.stream = query.get("stream", "")
        if self.stream and self.stream not in _STREAMS:
            raise UiError(f"stream {self.stream[:40]!r} is not one of {', '.join(_STREAMS)}")
        self.rank = _whole("rank", query.get("rank", ""))
        self.search = query.get("q", "")[:_MAX_SEARCH]
        self.after = _whole("after", query.get("after", ""))

    @property
    def filtered(self) -> bool:
        return bool(self.stream or self.rank is not None or self.search)

    def keeps(self, line: dict[str, Any]) -> bool:
        return (
            (not self.stream or line.get("stream") == self.stream)
            and (self.rank is None or line.get("rank") == self.rank)
            and (not self.search or self.search.lower() in str(line.get("line", "")).lower())
        )

    def query(self, *, after: int | None = None) -> str:
        pairs = [("host", self.host), ("stream", self.stream), ("q", self.search)]
        pairs += [("rank", str(self.rank))] if self.rank is not None else []
        pairs += [("after", str(after))] if after is not None else []
        return urlencode([(k, v) for k, v in pairs if v])


def _whole(name: str, value: str) -> int | None:
    if not value:
        return None
    if not value.isdigit() or len(value) > 18:
        raise UiError(f"{name} must be a whole number, not {value[:40]!r}")
    return int(value)


def _job_name(request: PageRequest) -> str:
    return request.params.get("job", "")


def _base(name: str) -> str:
    return f"/ui/jobs/{quote(name, safe='')}"


def render(request: PageRequest) -> str:
    name = _job_name(request)
    job = request.ui.jobs.describe_job(name)
    view = _LogView(request)
    base = _base(name)
    return (
        f'<h1 class="job-name">{esc(name)}</h1>'
        f'<div id="overview" data-live="{esc(base)}/-/overview" {_FOLLOW_OVERVIEW}>'
        f"{overview(request)}</div><h2>Metrics</h2>"
        f'<div id="metrics" data-live="{esc(base)}/-/metrics" {_FOLLOW_METRICS}>'
        f"{metrics(request)}</div>"
        f"<h2>Log</h2>{_log_filters(base, view, job)}"
        + _log_holder(request, base, view)
        + f"<h2>Hyperparameters</h2>{_mapping(job.get('HyperParameters') or {})}"
        f"<h2>Rules</h2>{_rules(job)}"
        f"<h2>Utilization</h2>{_utilization(request, name)}"
        f"<h2>Artifacts</h2>{_artifacts(job)}"
        f"<h2>Checkpoints</h2>{_checkpoints(request, name, job)}"
        f"<h2>Cost</h2>{_cost(request, name)}"
        f'<h2>Spec</h2><pre class="spec">{esc(_spec_yaml(job))}</pre>'
    )


def overview(request: PageRequest) -> str:
    """The live part ``overview``: status, times, failure reason, stop button, status
    timeline, hosts and ranks, cost and final metrics."""
    name = _job_name(request)
    job = request.ui.jobs.describe_job(name)
    status = str(job["TrainingJobStatus"])
    reason = job.get("FailureReason")
    return (
        (_MOVING if status not in _ENDED else "")  # its times and cost so far move
        + f'<p><span class="status s-{esc(status.lower())}">{esc(status)}</span> '
        f"<small>{esc(job.get('SecondaryStatus'))}</small> {_stop(request, name, status)}</p>"
        + (f'<p class="reason failure">{esc(reason)}</p>' if reason else "")
        + _facts(job)
        + "<h2>Status timeline</h2>"
        + _table(
            ["Status", "Start", "End", "Message"],
            [
                [t.get("Status"), t.get("StartTime"), t.get("EndTime"), t.get("StatusMessage")]
                for t in job.get("SecondaryStatusTransitions") or []
            ],
        )
        + "<h2>Hosts</h2>"
        + _table(["Host", "Status", "Exit code", "Node", "Ranks"], _hosts(job))
        + "<h2>Final metrics</h2>"
        + _table(
            ["Metric", "Value", "Time"],
            [[m["MetricName"], m["Value"], m["Timestamp"]] for m in job["FinalMetricDataList"]],
        )
    )


def _facts(job: dict[str, Any]) -> str:
    config = job.get("ResourceConfig") or {}
    cost = job.get("Cost") or {}
    facts = [
        ("Created", job.get("CreationTime")),
        ("Training started", job.get("TrainingStartTime")),
        ("Ended", job.get("TrainingEndTime")),
        ("Instances", f"{config.get('InstanceType', '')} x {config.get('InstanceCount', '')}"),
        ("Billable seconds", job.get("BillableTimeInSeconds")),
        ("Cost (USD, on demand)", cost.get("EstimatedCostUsd")),
        ("Cost (USD, at spot)", cost.get("EstimatedSpotCostUsd")),
        ("Attempt", job.get("Attempt")),
    ]
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts if v is not None)
    return f'<dl class="facts">{rows}</dl>'


def _hosts(job: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            h.get("Host"),
            h.get("Status"),
            h.get("ExitCode"),
            h.get("Node"),
            ", ".join(f"{r['Rank']}: {r['ExitCode']}" for r in h.get("Ranks") or []),
        ]
        for h in job.get("Hosts") or []
    ]


def _stop(request: PageRequest, name: str, status: str) -> str:
    if status != "InProgress":
        return ""
    return (
        f'<form method="post" action="{esc(_base(name))}/-/stop" class="stop inline">'
        f'{csrf_field(request.csrf)}<button type="submit">Stop</button></form>'
    )


def stop(request: PageRequest) -> str:
    """Action ``stop``: ``POST /api/v1/jobs/{name}/stop``'s handler for this page's job."""
    name = _job_name(request)
    request.ui.jobs.stop_job(name)
    return _base(name)


def metrics(request: PageRequest) -> str:
    """The live part ``metrics``: a chart of every metric, downsampled on the server."""
    series = request.ui.output.metric_series(_job_name(request), None, _CHART_WIDTH)["series"]
    if not series:
        return '<p class="empty">No metrics yet.</p>'
    return "".join(
        f'<figure class="chart metric"><figcaption>{esc(s["MetricName"])} '
        f"<small>{s['Count']} points, last {esc(_number(s['Buckets'][-1]['Last']))}</small>"
        f"</figcaption>{band_chart(str(s['MetricName']), s['Buckets'])}</figure>"
        for s in series
        if s["Buckets"]
    )


def _log_filters(base: str, view: _LogView, job: dict[str, Any]) -> str:
    hosts = [str(h.get("Host")) for h in job.get("Hosts") or []]
    host_options = "".join(
        f'<option value="{esc(h)}"{" selected" if h == view.host else ""}>{esc(h)}</option>'
        for h in ["", *hosts]
    )
    streams = "".join(
        f'<option value="{s}"{" selected" if s == view.stream else ""}>{s or "any"}</option>'
        for s in ("", *_STREAMS)
    )
    rank = "" if view.rank is None else str(view.rank)
    return (
        f'<form class="filters log-filters" method="get" action="{esc(base)}">'
        f'<label>Host <select name="host">{host_options}</select></label>'
        f'<label>Stream <select name="stream">{streams}</select></label>'
        f'<label>Rank <input name="rank" value="{esc(rank)}" size="4" inputmode="numeric"></label>'
        f'<input type="search" name="q" value="{esc(view.search)}" placeholder="search"'
        f' maxlength="{_MAX_SEARCH}" aria-label="search the log">'
        f'<button type="submit">Show</button> <a href="{esc(base)}">Follow the end</a>'
        f' <a href="{esc(base)}?{esc(view.query(after=0))}">From the start</a></form>'
    )


def _log_holder(request: PageRequest, base: str, view: _LogView) -> str:
    if view.after is None:  # following the end: job.js long-polls the live part
        live = f"{base}/-/log?{view.query()}"
        return f'<div id="log" data-follow="{esc(live)}">{log(request)}</div>'
    return f'<div id="log">{log(request)}</div>'


def log(request: PageRequest) -> str:
    """The log's view (the live part ``log`` while following): the last lines, or a page from a
    cursor; a filter reads on (at most ``_SCAN_PAGES`` pages) to fill it."""
    name, view = _job_name(request), _LogView(request)
    host = view.host or None
    if view.after is None:
        page = _logs(request, name, 0, host, 1000 if view.filtered else LOG_PAGE_LINES, tail=True)
        shown = [line for line in page["lines"] if view.keeps(line)][-LOG_PAGE_LINES:]
        ended = page["TrainingJobStatus"] in _ENDED
        return (
            f'<div class="follow" data-next="{int(page["next"])}"'
            f' data-ended="{"1" if ended else "0"}">'
            + _log_lines(shown, "Following the end: new lines appear as they are written.")
            + "</div>"
        )
    after, shown = view.after, []
    for _ in range(_SCAN_PAGES):
        page = _logs(request, name, after, host, 1000 if view.filtered else LOG_PAGE_LINES)
        for line in page["lines"]:
            if len(shown) == LOG_PAGE_LINES:
                break
            after = int(line["cursor"])
            if view.keeps(line):
                shown.append(line)
        if len(shown) == LOG_PAGE_LINES or not page["lines"]:
            break
    more = f'<a rel="next" href="{esc(_base(name))}?{esc(view.query(after=after))}">Next</a>'
    return _log_lines(shown, f"From cursor {view.after}.") + f'<nav class="pager">{more}</nav>'


async def follow_wait(request: PageRequest) -> None:
    """The log part's long-poll (``since`` and ``wait``): wait for a line after ``since`` on the
    event loop, as the logs route does (its reads on their own few threads), holding no worker
    thread; then the part renders the tail."""
    view = _LogView(request)
    since, wait = _whole("since", request.query.get("since", "")), _wait(request)
    if view.after is None and since is not None and wait:
        await request.ui.output.logs(_job_name(request), since, view.host or None, 1, wait, "lines")


def _wait(request: PageRequest) -> float:
    wait = _whole("wait", request.query.get("wait", "")) or 0
    if wait > _MAX_WAIT:
        raise UiError(f"wait must be at most {_MAX_WAIT} seconds")
    return float(wait)


def _logs(
    request: PageRequest,
    name: str,
    after: int,
    host: str | None,
    limit: int,
    *,
    tail: bool = False,
) -> dict[str, Any]:
    # The route's handler is async (its long-poll waits on the event loop): run it there.
    handler = request.ui.output.logs
    result: dict[str, Any] = anyio.from_thread.run(
        handler, name, after, host, limit, 0.0, "lines", limit if tail else 0
    )
    return result


def _log_lines(lines: list[dict[str, Any]], note: str) -> str:
    if not lines:
        return f'<p class="empty">{esc(note)} No lines to show.</p>'
    rows = "".join(
        f'<tr class="{esc(line.get("stream"))}"><td>{esc(line.get("host"))}</td>'
        f"<td>{esc(line.get('rank', ''))}</td><td>{esc(line.get('stream'))}</td>"
        f'<td class="line">{esc(line.get("line"))}</td></tr>'
        for line in lines
    )
    return (
        f'<p class="note">{esc(note)}</p><table class="log"><thead><tr><th>Host</th><th>Rank</th>'
        f"<th>Stream</th><th>Line</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _rules(job: dict[str, Any]) -> str:
    rows = []
    for kind, key in (("profiler", "ProfilerRuleEvaluationStatuses"),
                      ("debugger", "DebugRuleEvaluationStatuses")):  # fmt: skip
        for rule in job.get(key) or []:
            evaluation = rule.get("Evaluation") or {}
            evidence = evaluation.get("Evidence")
            rows.append([
                kind, rule.get("RuleConfigurationName"), rule.get("RuleEvaluationStatus"),
                rule.get("StatusDetails"), evaluation.get("Recommendation"),
                json.dumps(evidence, sort_keys=True, default=str) if evidence else "",
            ])  # fmt: skip
    return _table(["Kind", "Rule", "Verdict", "Details", "Recommendation", "Evidence"], rows)


def _utilization(request: PageRequest, name: str) -> str:
    try:
        report = request.ui.reports.profiler_report(name)
    except ApiError as exc:
        return f'<p class="empty">{esc(exc)}</p>'
    link = f'<p><a class="report" href="{esc(_base(name))}/profiler-report">Profiler report</a></p>'
    charts = [link]
    for host, lines in (report.get("timelines") or {}).items():
        for part, title in (("host", "CPU, I/O wait, memory"), ("cores", "per core"),
                            ("gpus", "per GPU"), ("gpu_memory", "GPU memory")):  # fmt: skip
            drawn = {k: v for k, v in (lines.get(part) or {}).items() if k != "memory_bytes"}
            charts.append(lines_chart(f"{host}: {title} (%)", drawn))
    if len(charts) == 1:
        charts.append('<p class="empty">No utilization samples yet.</p>')
    return "".join(charts)


def _artifacts(job: dict[str, Any]) -> str:
    """Each artifact with its URI; the model and output archives with a download link."""
    name = str(job.get("TrainingJobName", ""))
    rows = []
    for artifact in job.get("Artifacts") or []:
        label = str(artifact.get("Name", ""))
        link = (f'<a class="download" href="{esc(artifact_url(name, label))}" download>Download</a>'
                if label in DOWNLOADABLE else "")  # fmt: skip
        cells = [label, artifact.get("Host", ""), artifact.get("Uri")]
        rows.append("".join(f"<td>{esc(c)}</td>" for c in cells) + f"<td>{link}</td>")
    if not rows:
        return '<p class="empty">None.</p>'
    head = "".join(f"<th>{h}</th>" for h in ("Name", "Host", "URI", ""))
    body = "".join(f"<tr>{row}</tr>" for row in rows)
    return f'<table class="artifacts"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


_CHECKPOINT_COLUMNS = (
    ("Host", "Host"), ("Attempt", "Attempt"), ("Kind", "Sync"), ("At", "At"), ("Files", "Files"),
    ("Bytes", "Bytes"), ("UploadSeconds", "Upload (s)"), ("Reason", "Reason"),
)  # fmt: skip


def _checkpoints(request: PageRequest, name: str, job: dict[str, Any]) -> str:
    """``GET /api/v1/jobs/{name}/checkpoints``: each host's restores and syncs, with their
    state (synced, restored, sync_failed, sync_incomplete), under the job's checkpoint URI."""
    where = (job.get("CheckpointConfig") or {}).get("S3Uri")
    records = request.ui.reports.checkpoints(name)["Checkpoints"]
    rows = [[_checkpoint_cell(key, r.get(key)) for key, _ in _CHECKPOINT_COLUMNS] for r in records]
    note = f'<p class="checkpoint-uri">{esc(where)}</p>' if where else ""
    return note + _table([title for _, title in _CHECKPOINT_COLUMNS], rows)


def _checkpoint_cell(key: str, value: Any) -> Any:
    if key == "At" and isinstance(value, (int, float)):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value)) + " UTC"
    return value


_COST_KEYS = (
    "OnDemandCostUsd", "SpotCostUsd", "SavingsPercent", "BillableTimeInSeconds",
    "TrainingTimeInSeconds", "LostSeconds", "LostCostUsd", "RestartSeconds", "CheckpointsSynced",
)  # fmt: skip


def _cost(request: PageRequest, name: str) -> str:
    """``GET /api/v1/jobs/{name}/cost`` (what ``trainops cost`` shows): its money and time, the
    interruptions, checkpoint syncs and the advised checkpoint interval."""
    cost = request.ui.reports.cost(name, None, None)
    rows = [[key, cost.get(key)] for key in _COST_KEYS if cost.get(key) is not None]
    rows.append(["Interruptions", len(cost.get("Interruptions") or [])])
    rows.append(["CheckpointSyncProblems", cost.get("CheckpointSyncProblems") or 0])  # a count
    interval = cost.get("CheckpointInterval") or {}
    rows += [[f"CheckpointInterval.{k}", v] for k, v in interval.items() if not isinstance(v, dict)]
    return _table(["", ""], rows)


def _spec_yaml(job: dict[str, Any]) -> str:
    spec = {k: v for k, v in job.items() if k not in _DYNAMIC}
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _mapping(values: dict[str, Any]) -> str:
    return _table(["Name", "Value"], [[k, v] for k, v in values.items()])


def _table(heads: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return '<p class="empty">None.</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(_number(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _number(value: object) -> str:
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


JOB_PAGE = Page(
    path="/ui/jobs/{job}",
    title="Job",
    render=render,
    scripts=("job.js",),
    parts={"overview": overview, "metrics": metrics, "log": log},
    waits={"log": follow_wait},
    actions={"stop": stop},
)
