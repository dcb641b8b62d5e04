"""Small server-drawn SVG charts for the job page: a downsampled metric (a min-max band under
its last values) and utilization lines. Every label is escaped; an SVG has no script and no
style attribute (presentation attributes only), so it passes the pages' CSP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainops.server.ui._page import esc

__all__ = ["band_chart", "lines_chart"]

_W, _H = 640, 200
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 10, 10, 24
_COLORS = ("#1f4e79", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#0a7d8c", "#bf3989")


class _Frame:
    """Scales ``[x0, x1] x [y0, y1]`` onto the plot area."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float) -> None:
        self.x0, self.x1 = x0, x1 if x1 > x0 else x0 + 1.0
        pad = (y1 - y0) * 0.05 or abs(y1) * 0.05 or 1.0
        self.y0, self.y1 = y0 - pad, y1 + pad

    def x(self, value: float) -> float:
        return _LEFT + (value - self.x0) / (self.x1 - self.x0) * (_W - _LEFT - _RIGHT)

    def y(self, value: float) -> float:
        return _TOP + (self.y1 - value) / (self.y1 - self.y0) * (_H - _TOP - _BOTTOM)

    def axes(self, x_label: str) -> str:
        bottom, right = _H - _BOTTOM, _W - _RIGHT
        return (
            f'<line x1="{_LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#8c959f"/>'
            f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{bottom}" stroke="#8c959f"/>'
            f'<text x="{_LEFT - 4}" y="{_TOP + 10}" text-anchor="end" font-size="10">'
            f"{_number(self.y1)}</text>"
            f'<text x="{_LEFT - 4}" y="{bottom}" text-anchor="end" font-size="10">'
            f"{_number(self.y0)}</text>"
            f'<text x="{right}" y="{_H - 6}" text-anchor="end" font-size="10">'
            f"{esc(x_label)}: {_number(self.x1 - self.x0)}</text>"
        )


def band_chart(title: str, buckets: Sequence[Mapping[str, Any]]) -> str:
    """A metric's buckets (``GET /jobs/{name}/metric-series``): the band from each bucket's
    ``Min`` to ``Max`` and a line through its ``Last`` values, against seconds from the first."""
    if not buckets:
        return ""
    frame = _Frame(
        float(buckets[0]["Start"]),
        float(buckets[-1]["End"]),
        min(float(b["Min"]) for b in buckets),
        max(float(b["Max"]) for b in buckets),
    )
    upper = [f"{frame.x(b['Start']):.1f},{frame.y(b['Max']):.1f}" for b in buckets]
    lower = [f"{frame.x(b['Start']):.1f},{frame.y(b['Min']):.1f}" for b in reversed(buckets)]
    last = [f"{frame.x(b['End']):.1f},{frame.y(b['Last']):.1f}" for b in buckets]
    return (
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img"><title>{esc(title)}</title>'
        f"{frame.axes('seconds')}"
        f'<polygon points="{" ".join(upper + lower)}" fill="#1f4e79" fill-opacity="0.18"'
        f' stroke="none"/>'
        f'<polyline points="{" ".join(last)}" fill="none" stroke="#1f4e79" stroke-width="1.5"/>'
        "</svg>"
    )


def lines_chart(title: str, lines: Mapping[str, Sequence[Sequence[float]]]) -> str:
    """Named lines of ``[x, y]`` points (the profiler report's timelines), with a legend."""
    points = [p for line in lines.values() for p in line]
    if not points:
        return ""
    frame = _Frame(
        min(p[0] for p in points),
        max(p[0] for p in points),
        min(0.0, min(p[1] for p in points)),
        max(p[1] for p in points),
    )
    drawn, legend = [], []
    for index, (name, line) in enumerate(lines.items()):
        color = _COLORS[index % len(_COLORS)]
        path = " ".join(f"{frame.x(p[0]):.1f},{frame.y(p[1]):.1f}" for p in line)
        drawn.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.2"/>')
        legend.append(f'<li><span class="swatch c{index % len(_COLORS)}"></span>{esc(name)}</li>')
    return (
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img"><title>{esc(title)}</title>'
        f"{frame.axes('seconds since the job started')}{''.join(drawn)}</svg>"
        f'<ul class="legend">{"".join(legend)}</ul></figure>'
    )


def _number(value: float) -> str:
    return f"{value:.4g}"
