"""The tuning report as one self-contained HTML page, and the report's files written at once.

The page fetches nothing: its figures are PNGs inlined as ``data:`` URIs, its style is inline,
it holds no script, and a Content-Security-Policy says so to the browser. Every user string
(the job's name, parameter names, categorical values, the metric) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Mapping
from pathlib import Path

from trainops.tuning.analysis._data import IMPORTANCE_METHOD, TrialPoint, TuningAnalysis
from trainops.tuning.analysis._plots import PLOT_NAMES, plot_pngs

__all__ = ["render_html", "write_report"]

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1100px}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}"
    "th{background:#f3f3f3}td.n{text-align:right}img{max-width:100%}.note{color:#555}"
)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, form: str = "{:.6g}") -> str:
    return "" if value is None else form.format(value)


def _table(header: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i in numeric else ''}>{_e(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _summary(a: TuningAnalysis) -> str:
    best = a.best()
    saved = a.early_stopping
    share = saved.saved_share
    items = [
        f"Objective: {a.metric_name} ({a.objective_type})",
        f"Trials: {len(a.trials)}",
        "Best: none yet" if best is None else f"Best: {best.training_job} ({best.objective:.6g})",
        f"Cost: {a.total_cost_usd:.6f} {a.currency} over {a.total_seconds:.0f} billed seconds",
        f"Early stopping: {saved.stopped_trials} trials stopped, {saved.saved_steps} steps and "
        f"about {saved.saved_seconds:.0f} s ({saved.saved_cost_usd:.6f} {a.currency}) not run"
        + ("" if share is None else f", {share:.0%} of the full-budget time")
        + f"; budget {saved.budget_steps if saved.budget_steps is not None else '?'} steps "
        f"({saved.budget_source})",
    ]
    return "<ul>" + "".join(f"<li>{_e(item)}</li>" for item in items) + "</ul>"


def _trial_row(t: TrialPoint) -> list[str]:
    values = ", ".join(f"{k}={v}" for k, v in sorted(t.hyperparameters.items()))
    return [str(t.number), t.training_job, t.status + (" (early)" if t.early_stopped else ""),
            values, _num(t.objective), _num(t.best_so_far), str(t.steps), f"{t.seconds:.0f}",
            f"{t.cost_usd:.6f}", str(t.saved_steps)]  # fmt: skip


def _images(pngs: Mapping[str, bytes]) -> str:
    if not pngs:
        return "<p class=note>Figures need matplotlib: pip install 'trainops[plot]'.</p>"
    return "".join(
        f'<p><img alt="{_e(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(pngs[name]).decode("ascii")}"></p>'
        for name in PLOT_NAMES
        if name in pngs
    )


def render_html(analysis: TuningAnalysis, pngs: Mapping[str, bytes] | None = None) -> str:
    """The report page of ``analysis`` with its figures (``pngs``; none: tables only)."""
    importance = _table(
        ["parameter", "importance", "variance explained alone"],
        [[i.parameter, f"{i.importance:.3f}", f"{i.explained:.3f}"] for i in analysis.importance],
        {1, 2},
    )
    trials = _table(
        ["#", "training job", "status", "hyperparameters", "objective", "best so far", "steps",
         "seconds", f"cost ({analysis.currency})", "steps saved"],
        [_trial_row(t) for t in analysis.trials],
        {0, 4, 5, 6, 7, 8, 9},
    )  # fmt: skip
    title = f"Tuning job {analysis.name}"
    return (
        "<!DOCTYPE html><html><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1>{_summary(analysis)}{_images(pngs or {})}"
        f"<h2>Parameter importance</h2><p class=note>{_e(IMPORTANCE_METHOD)}; "
        f"{analysis.importance_trials} Completed trials.</p>{importance}"
        f"<h2>Trials</h2>{trials}</body></html>\n"
    )


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` whole or not at all."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_report(analysis: TuningAnalysis, folder: Path) -> list[Path]:
    """Write ``folder``/``<stem>.png`` per figure (with matplotlib), ``index.html`` and
    ``analysis.json``; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        pngs = plot_pngs(analysis)
    except ImportError:
        pngs = {}
    written = []
    for name, data in pngs.items():
        _write(folder / f"{name}.png", data)
        written.append(folder / f"{name}.png")
    document = json.dumps(analysis.to_json(), indent=1, allow_nan=False) + "\n"
    _write(folder / "analysis.json", document.encode("utf-8"))
    _write(folder / "index.html", render_html(analysis, pngs).encode("utf-8"))
    return [*written, folder / "analysis.json", folder / "index.html"]
