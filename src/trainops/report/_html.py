"""The profiler report as one self-contained HTML page, rendered from :func:`report_data`'s dict.

The page needs nothing but itself: CSS inline, charts as inline SVG, no script, no font, image
or link that leaves the file; its Content-Security-Policy forbids loading anything anyway, so
even a string that slipped through escaping could not fetch or run. Every string that comes
from the job (names, hosts, rule details, messages) is escaped with :func:`html.escape`.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

from trainops.report._svg import heatmap, histogram_chart, line_chart, stacked_bar

__all__ = ["render_html", "report_json"]

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2933;margin:0;background:#f5f7fa}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;border-bottom:2px solid #d9e2ec;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:18px 0 6px}table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #d9e2ec;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f4f8}td.l,th.l{text-align:left}svg{width:100%;height:auto;display:block;margin:4px 0}
svg text{font-size:11px;fill:#52606d}svg text.axis{fill:#1f2933}svg .grid{stroke:#e4e7eb}svg .frame{fill:none;stroke:#9aa5b1}
.none{color:#7b8794;font-style:italic}.IssuesFound{color:#b42318;font-weight:600}.NoIssuesFound{color:#027a48}
.Error{color:#b54708;font-weight:600}.advice{border-left:4px solid #4e79a7;padding:4px 12px;margin:10px 0;background:#f8fafc}
.model{color:#52606d;font-size:12px}nav a{margin-right:10px}code{background:#f0f4f8;padding:0 3px}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _n(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:.{digits}g}"
    return _e(value)


def _time(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A table; cells are already escaped markup (first column left-aligned)."""
    head = "".join(
        f'<th class="{"l" if i == 0 else ""}">{_e(h)}</th>' for i, h in enumerate(header)
    )
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i == 0 else ""}">{c}</td>' for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )  # fmt: skip
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _none(section: dict[str, Any]) -> str:
    return f'<p class="none">{_e(section.get("reason", "no data"))}</p>'


def render_html(data: dict[str, Any]) -> str:
    """The whole page for report ``data``."""
    job, sections = data["job"], data["sections"]
    title = f"Profiler report: {job['name']}"
    state = (
        "running: a snapshot as of " + _time(data["generated_at"])
        if job["running"]
        else job["status"]
    )
    blocks = [
        _section("summary", "1. Training job summary", _summary(sections["summary"])),
        _section("advice", "Right-sizing advice", _advice(data["advice"])),
        _section("system", "2. System usage statistics", _system(sections["system_usage"], data)),
        _section("framework", "3. Framework metrics summary", _framework(sections["framework"])),
        _section("rules", "4. Rules summary", _rules(sections["rules"])),
        _section("steps", "5. Step durations", _steps(sections["step_durations"])),
        _section("gpu", "6. GPU utilization", _gpu(sections["gpu_utilization"], data)),
        _section("batch", "7. Batch size", _batch(sections["batch_size"])),
        _section("cpu", "8. CPU bottlenecks", _cpu(sections["cpu_bottlenecks"])),
        _section("io", "9. I/O bottlenecks", _io(sections["io_bottlenecks"])),
        _section("balance", "10. Load balancing", _balance(sections["load_balancing"])),
        _section("gpumem", "11. GPU memory", _gpu_memory(sections["gpu_memory"], data)),
    ]
    nav = "".join(f'<a href="#{key}">{_e(name.split(". ")[-1])}</a>' for key, name, _ in blocks)
    body = "".join(
        f'<section id="{key}"><h2>{_e(name)}</h2>{content}</section>'
        for key, name, content in blocks
    )
    errors = "".join(f"<li>{_e(e)}</li>" for e in data.get("read_errors", []))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body><main><h1>{_e(title)}</h1>"
        f"<p>{_e(job['instance_count'])} x {_e(job['instance_type'])} &middot; {_e(state)} &middot; "
        f"profiler data <code>{_e(job['profiler_prefix'])}</code></p><nav>{nav}</nav>{body}"
        + (f"<h2>Unreadable profiler files</h2><ul>{errors}</ul>" if errors else "")
        + "</main></body></html>\n"
    )


def _section(key: str, name: str, content: str) -> tuple[str, str, str]:
    return key, name, content


def _summary(s: dict[str, Any]) -> str:
    rows = [[_e("start_time"), _time(s["start_time"])], [_e("end_time"), _time(s["end_time"]) + ("" if s["ended"] else " (now)")],
            [_e("job_duration_in_seconds"), _n(s["job_duration_in_seconds"], 6)]]  # fmt: skip
    for key in ("training_loop_start", "training_loop_end"):
        if key in s:
            rows.append([_e(key), _time(s[key])])
    for key in (
        "training_loop_duration_in_seconds",
        "initialization_in_seconds",
        "finalization_in_seconds",
    ):
        if key in s:
            rows.append([_e(key), _n(s[key], 6)])
    out = _table(["", "value"], rows)
    if "split_percent" in s:
        out += stacked_bar(s["split_percent"], "time split")
    else:
        out += _none(s)
    transitions = [
        [_e(t["status"]), _time(t["start_time"]), _time(t["end_time"]), _e(t["message"])]
        for t in s["transitions"]
    ]
    return (
        out
        + "<h3>Status transitions</h3>"
        + _table(["status", "start", "end", "message"], transitions)
    )


def _advice(a: dict[str, Any]) -> str:
    if not a.get("available"):
        return _none(a)
    head = (f"<p>Unit of work: <b>{_e(a['unit'])}</b> ({_e(a['unit_source'])}); measured "
            f"{_n(a['seconds_per_unit'])} s per {_e(a['unit'])}. Prices: {_e(a['prices'])}.</p>")  # fmt: skip
    if not a["items"]:
        return (
            head + '<p class="none">Nothing to change: no measurement points at a better size.</p>'
        )
    items = []
    for item in a["items"]:
        rows = [[_e(name), _e(f["instance_type"]), _n(f["seconds_per_unit"]), _n(f["usd_per_unit"]), _n(f["usd_per_hour"])]
                for name, f in (("now", item["current"]), ("proposed", item["proposed"])) if f]  # fmt: skip
        table = _table(
            ["", "instance type", f"s per {a['unit']}", f"USD per {a['unit']}", "USD per hour"],
            rows,
        )
        items.append(f'<div class="advice"><h3>{_e(item["title"])}</h3><p>{_e(item["text"])}</p>{table}'
                     f'<p class="model">Model: {_e(item["model"])}</p></div>')  # fmt: skip
    return head + "".join(items)


def _system(s: dict[str, Any], data: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    out = []
    for node in s["nodes"]:
        host = node["host"]
        rows = [
            [
                _e(m["metric"]),
                _e(m["unit"]),
                *(_n(m[k]) for k in ("max", "p99", "p95", "p50", "min")),
            ]
            for m in node["metrics"]
        ]
        out.append(
            f"<h3>{_e(host)}: {node['samples']} samples every {_n(node['interval_ms'])} ms</h3>"
        )
        out.append(_table(["metric", "unit", "max", "p99", "p95", "p50", "min"], rows))
        lines = data["timelines"].get(host, {})
        if lines.get("host"):
            out.append(
                line_chart(
                    {k: v for k, v in lines["host"].items() if k != "memory_bytes"},
                    y_label="%",
                    y_max=100,
                    title=f"{host} CPU, I/O wait, memory",
                )
            )
        if lines.get("cores"):
            out.append(
                "<h3>Utilization per core</h3>"
                + line_chart(lines["cores"], y_label="%", y_max=100, title=f"{host} per core")
            )
        heat = data["heatmaps"].get(host)
        if heat:
            out.append(
                "<h3>Per-core heatmap</h3>"
                + heatmap(
                    heat["cores"],
                    heat["values"],
                    heat["start"],
                    heat["bin_seconds"],
                    f"{host} cores x time",
                )
            )
    return "".join(out)


def _framework(s: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    out = "<h3>Training loop: train and eval steps against the rest</h3>" + stacked_bar(
        s["percent_of_loop"], "loop split"
    )
    out += "<h3>Phases of the train steps</h3>" + stacked_bar(s["phase_percent_of_train"], "phases")
    rows = [[_e(f"{r['host']} rank {r['rank']}"), _n(r["train_steps"]), _n(r["eval_steps"]), _n(r["train"]), _n(r["eval"]),
             _n(r["other"]), *(_n(r["phases"][p]) for p in ("data", "forward", "backward", "optimizer"))] for r in s["ranks"]]  # fmt: skip
    return out + _table(
        [
            "rank",
            "train steps",
            "eval steps",
            "train s",
            "eval s",
            "other s",
            "data s",
            "forward s",
            "backward s",
            "optimizer s",
        ],
        rows,
    )


def _rules(s: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    rows = []
    for r in s["rules"]:
        name = ("&nbsp;&nbsp;&#x2514; " if r.get("member_of") else "") + _e(r["name"])
        name += "" if r["name"] == r["rule"] else f" ({_e(r['rule'])})"
        name += f'<br><span class="model">{_e(r.get("description", ""))}</span>'
        evidence = r["evidence"]
        shown = (
            f"<details><summary>{len(evidence)} characters</summary><code>{_e(evidence)}</code></details>"
            if len(evidence) > 160
            else f"<code>{_e(evidence)}</code>" if evidence else ""
        )  # fmt: skip
        status = f'<span class="{_e(r["status"])}">{_e(r["status"])}</span>'
        rows.append(
            [name, status, _n(r["triggered"]), _e(r["details"]), _e(r["recommendation"]), shown]
        )
    note = "" if s["final"] else '<p class="none">Some rules are still being evaluated.</p>'
    return note + _table(
        ["rule", "status", "triggered", "details", "recommendation", "evidence"], rows
    )


def _steps(s: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    out, timelines = [], {}
    rows = []
    for rank in s["ranks"]:
        label = f"{rank['host']} rank {rank['rank']}"
        for mode in ("train", "eval"):
            if mode in rank:
                d = rank[mode]
                st = d["stats"]
                rows.append(
                    [
                        _e(f"{label} {mode}"),
                        _n(st["count"]),
                        _n(st["mean"]),
                        _n(st["std"]),
                        *(_n(st[k]) for k in ("min", "p50", "p95", "p99", "max")),
                        _n(d["outliers"]),
                    ]
                )
        if "train" in rank:
            timelines[label] = rank["train"]["timeline"]
    out.append(
        _table(
            [
                "rank",
                "steps",
                "mean s",
                "std s",
                "min",
                "p50",
                "p95",
                "p99",
                "max",
                f"outliers (> mean + {s['stddev']:g} std)",
            ],
            rows,
        )
    )
    first = next((r for r in s["ranks"] if "train" in r), None)
    if first is not None:
        hist = first["train"]["histogram"]
        out.append(
            f"<h3>Histogram of train step durations ({_e(first['host'])} rank {first['rank']})</h3>"
        )
        out.append(
            histogram_chart(
                hist["edges"], hist["counts"], x_label="step duration (s)", title="step durations"
            )
        )
    out.append(
        "<h3>Step durations over time</h3>"
        + line_chart(timelines, y_label="s", title="step durations", dots=True)
    )
    return "".join(out)


def _gpu(s: dict[str, Any], data: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    rows = [
        [
            _e(f"{g['host']} gpu{g['gpu']}"),
            *(_n(g[k]) for k in ("max", "p95", "p50", "p5", "min")),
            _e(g["verdict"]),
        ]
        for g in s["gpus"]
    ]
    out = _table(
        [
            "GPU",
            "max",
            "p95",
            "p50",
            "p5",
            "min",
            f"verdict (p95 < {s['threshold_p95']:g} %: underused)",
        ],
        rows,
    )
    for host, lines in data["timelines"].items():
        if lines.get("gpus"):
            out += line_chart(
                lines["gpus"], y_label="%", y_max=100, title=f"{host} GPU utilization"
            )
    return out


def _batch(s: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    rows = []
    for node in s["nodes"]:
        for g in node["gpus"] or [None]:
            rows.append([_e(node["host"]), _n(node["cpu_p95"]), _e(f"gpu{g['gpu']}") if g else "-", _n(g["p95"]) if g else "-",
                         _n(g["memory_p95"]) if g else "-", _n(g["could_grow"]) if g else _e(node.get("note", ""))])  # fmt: skip
    out = _table(
        ["node", "CPU p95 %", "GPU", "GPU p95 %", "GPU memory p95 %", "batch could grow"], rows
    )
    ranks = [[_e(f"{r['host']} rank {r['rank']}"), _n(r["samples_per_step"])] for r in s["ranks"]]
    return out + (_table(["rank", "samples per step (median)"], ranks) if ranks else "")


def _cpu(s: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    t = s["thresholds"]
    rows = [
        [
            _e(n["host"]),
            _n(n["samples"]),
            _n(n["cpu_busy_percent"]),
            _n(n.get("bottleneck_percent")),
            _n(n.get("found")) if "found" in n else _e(n.get("note", "")),
        ]
        for n in s["nodes"]
    ]
    out = f"<p>CPU busy: above {t['cpu_threshold']:g} %; a bottleneck: busy while a GPU is below {t['gpu_threshold']:g} %, in more than {t['threshold']:g} % of samples.</p>"
    out += _table(
        ["node", "samples", "CPU busy % of samples", "bottleneck % of samples", "bottleneck"], rows
    )
    loader = s["dataloader"]
    if not loader.get("available"):
        return out + "<h3>Dataloader</h3>" + _none(loader)
    rows = [
        [
            _e(f"{r['host']} rank {r['rank']}"),
            _n(r["workers"]),
            _n(r["cores"]),
            *(_n((r["fetch"] or {}).get(k)) for k in ("p50", "p95", "max")),
        ]
        for r in loader["ranks"]
    ]
    return (
        out
        + "<h3>Dataloader</h3>"
        + _table(["rank", "workers", "cores", "fetch p50 s", "fetch p95 s", "fetch max s"], rows)
    )


def _io(s: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    rows = [[_e(n["host"]), _n(n["iowait_p95"]), _n(n["iowait_high_percent"]), _n(n["disk_read_p95"]), _n(n["disk_write_p95"]),
             _n(n.get("bottleneck_percent")), _n(n.get("found")) if "found" in n else _e(n.get("note", ""))] for n in s["nodes"]]  # fmt: skip
    return _table(
        [
            "node",
            "I/O wait p95 %",
            f"I/O wait > {s['thresholds']['io_threshold']:g} % (% of samples)",
            "disk read p95 B/s",
            "disk write p95 B/s",
            "bottleneck %",
            "bottleneck",
        ],
        rows,
    )


def _balance(s: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    out = ""
    if s["gpu_pairs"]:
        rows = [
            [
                _e(f"{p['host']} gpu{p['gpus'][0]} / gpu{p['gpus'][1]}"),
                _n(p["distance"]),
                _n(p["found"]),
            ]
            for p in s["gpu_pairs"]
        ]
        out += _table(["GPUs", "Jensen-Shannon distance", f"uneven (> {s['threshold']:g})"], rows)
    if s["ranks"]:
        rows = [[_e(f"{r['host']} rank {r['rank']}"), _n(r["median_step"])] for r in s["ranks"]]
        out += _table(["rank", "median train step s"], rows)
        out += (
            f"<p>Slowest rank's median step over the fastest's: {_n(s['slowest_over_fastest'])}</p>"
        )
    return out


def _gpu_memory(s: dict[str, Any], data: dict[str, Any]) -> str:
    if not s.get("available"):
        return _none(s)
    rows = [
        [
            _e(f"{g['host']} gpu{g['gpu']}"),
            *(_n(g[k]) for k in ("max", "p95", "p50", "min")),
            _n(g["rise"]),
            _n(g["found"]),
        ]
        for g in s["gpus"]
    ]
    out = _table(
        [
            "GPU",
            "max %",
            "p95 %",
            "p50 %",
            "min %",
            f"largest rise of the {s['window']}-sample mean",
            f"grows (> {s['increase']:g})",
        ],
        rows,
    )
    for host, lines in data["timelines"].items():
        if lines.get("gpu_memory"):
            out += line_chart(
                lines["gpu_memory"],
                y_label="% of GPU memory",
                y_max=100,
                title=f"{host} GPU memory",
            )
    return out


def report_json(data: dict[str, Any]) -> str:
    """The data as the JSON file written beside the page."""
    return json.dumps(data, indent=1, allow_nan=False, sort_keys=False) + "\n"
