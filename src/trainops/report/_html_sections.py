"""The report page's sections: each renders one section of :func:`report_data`'s dict as markup.

Every string from the data goes through :func:`~trainops.report._markup.e` (HTML escaping);
numbers through :func:`~trainops.report._markup.number`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainops.report._html_cost import cost_section
from trainops.report._markup import e as _e
from trainops.report._markup import missing as _none
from trainops.report._markup import number as _n
from trainops.report._markup import table as _table
from trainops.report._markup import when as _time
from trainops.report._svg import heatmap, histogram_chart, line_chart, stacked_bar

__all__ = ["SECTION_RENDERERS"]


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
    guide = None
    if first is not None and len(timelines) == 1:
        guide = (
            f"outlier limit {first['train']['outlier_limit']:.3g} s",
            first["train"]["outlier_limit"],
        )
    out.append(
        "<h3>Step durations over time</h3>"
        + line_chart(timelines, y_label="s", title="step durations", dots=True, guide=guide)
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


#: (anchor, title, renderer of (section, whole data)) in page order.
SECTION_RENDERERS: tuple[tuple[str, str, Callable[[dict[str, Any]], str]], ...] = (
    ("summary", "1. Training job summary", lambda d: _summary(d["sections"]["summary"])),
    ("advice", "Right-sizing advice", lambda d: _advice(d["advice"])),
    ("cost", "Cost and spot interruptions", lambda d: cost_section(d.get("cost"))),
    ("system", "2. System usage statistics", lambda d: _system(d["sections"]["system_usage"], d)),
    ("framework", "3. Framework metrics summary", lambda d: _framework(d["sections"]["framework"])),
    ("rules", "4. Rules summary", lambda d: _rules(d["sections"]["rules"])),
    ("steps", "5. Step durations", lambda d: _steps(d["sections"]["step_durations"])),
    ("gpu", "6. GPU utilization", lambda d: _gpu(d["sections"]["gpu_utilization"], d)),
    ("batch", "7. Batch size", lambda d: _batch(d["sections"]["batch_size"])),
    ("cpu", "8. CPU bottlenecks", lambda d: _cpu(d["sections"]["cpu_bottlenecks"])),
    ("io", "9. I/O bottlenecks", lambda d: _io(d["sections"]["io_bottlenecks"])),
    ("balance", "10. Load balancing", lambda d: _balance(d["sections"]["load_balancing"])),
    ("gpumem", "11. GPU memory", lambda d: _gpu_memory(d["sections"]["gpu_memory"], d)),
)
