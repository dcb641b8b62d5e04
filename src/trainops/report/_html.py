"""The profiler report as one self-contained HTML page, rendered from :func:`report_data`'s dict.

The page needs nothing but itself: CSS inline, charts as inline SVG, no script, no font, image
or link that leaves the file; its Content-Security-Policy forbids loading anything anyway, so
even a string that slipped through escaping could not fetch or run. Every string that comes
from the job (names, hosts, rule details, messages) is escaped with :func:`html.escape`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from trainops.report._html_sections import SECTION_RENDERERS
from trainops.report._markup import e as _e
from trainops.report._markup import when

__all__ = ["REPORT_CSP", "render_html", "report_json"]

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

_STYLE_HASH = base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()
#: The page's Content-Security-Policy: nothing loaded, no script, and no style but its own
#: ``<style>`` (allowed by its hash, so a style injected into the page would not apply).
REPORT_CSP = f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src data:"


def render_html(data: dict[str, Any]) -> str:
    """The whole page for report ``data``."""
    job = data["job"]
    title = f"Profiler report: {job['name']}"
    state = (
        "running: a snapshot as of " + when(data["generated_at"])
        if job["running"]
        else job["status"]
    )
    blocks = [(key, name, render(data)) for key, name, render in SECTION_RENDERERS]
    nav = "".join(f'<a href="#{key}">{_e(name.split(". ")[-1])}</a>' for key, name, _ in blocks)
    body = "".join(
        f'<section id="{key}"><h2>{_e(name)}</h2>{content}</section>'
        for key, name, content in blocks
    )
    errors = "".join(f"<li>{_e(error)}</li>" for error in data.get("read_errors", []))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{REPORT_CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body><main><h1>{_e(title)}</h1>"
        f"<p>{_e(job['instance_count'])} x {_e(job['instance_type'])} &middot; {_e(state)} &middot; "
        f"profiler data <code>{_e(job['profiler_prefix'])}</code></p><nav>{nav}</nav>{body}"
        + (f"<h2>Unreadable profiler files</h2><ul>{errors}</ul>" if errors else "")
        + "</main></body></html>\n"
    )


def report_json(data: dict[str, Any]) -> str:
    """The data as the JSON file written beside the page."""
    return json.dumps(data, indent=1, allow_nan=False, sort_keys=False) + "\n"
