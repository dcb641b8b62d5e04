"""Inline SVG charts for the report: line charts, a heatmap, a histogram and a stacked bar.

Each function returns one ``<svg>`` element as text, drawn from plain data; every label passes
through :func:`html.escape`, so a host or column name cannot break out of the markup. Nothing
refers to anything outside the element (no fonts, images or scripts).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

__all__ = ["PALETTE", "heatmap", "histogram_chart", "line_chart", "stacked_bar"]

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")  # fmt: skip
_W, _H, _LEFT, _BOTTOM, _TOP, _RIGHT = 900, 230, 56, 38, 10, 130


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _tick(value: float) -> str:
    if abs(value) >= 1e9:
        return f"{value / 1e9:.3g}G"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.3g}k"
    return f"{value:.3g}"


def _frame(x0: float, x1: float, y0: float, y1: float, x_label: str, y_label: str) -> list[str]:
    """Axes, grid lines and tick labels of a plot area."""
    parts = []
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    for i in range(5):
        y = _TOP + height * i / 4
        value = y1 - (y1 - y0) * i / 4
        parts.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + width}" y2="{y:.1f}" class="grid"/>'
        )
        parts.append(
            f'<text x="{_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{_e(_tick(value))}</text>'
        )
    for i in range(6):
        x = _LEFT + width * i / 5
        value = x0 + (x1 - x0) * i / 5
        parts.append(
            f'<text x="{x:.1f}" y="{_H - 22}" text-anchor="middle">{_e(_tick(value))}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + width / 2:.1f}" y="{_H - 4}" text-anchor="middle" class="axis">{_e(x_label)}</text>'
    )
    parts.append(
        f'<text x="12" y="{_TOP + height / 2:.1f}" class="axis" transform="rotate(-90 12 {_TOP + height / 2:.1f})" text-anchor="middle">{_e(y_label)}</text>'
    )
    parts.append(f'<rect x="{_LEFT}" y="{_TOP}" width="{width}" height="{height}" class="frame"/>')
    return parts


def line_chart(
    lines: Mapping[str, Sequence[Sequence[float]]],
    *,
    y_label: str,
    x_label: str = "seconds since the job started",
    y_max: float | None = None,
    title: str = "",
    dots: bool = False,
    guide: tuple[str, float] | None = None,
) -> str:
    """One polyline (or dots) per named series of ``[x, y]`` points, with a legend; ``guide``
    (label, y) draws a dashed horizontal line (a threshold)."""
    points = [p for line in lines.values() for p in line]
    if not points:
        return ""
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    top = y_max if y_max is not None else max(p[1] for p in points) * 1.05 or 1.0
    if guide is not None and y_max is None:
        top = max(top, guide[1] * 1.05)
    x1 = x1 if x1 > x0 else x0 + 1
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def xy(p: Sequence[float]) -> str:
        x = _LEFT + (p[0] - x0) / (x1 - x0) * width
        y = _TOP + height - min(max(p[1], 0.0), top) / top * height
        return f"{x:.1f},{y:.1f}"

    parts = [f'<svg viewBox="0 0 {_W} {_H}" role="img">', f"<title>{_e(title)}</title>"]
    parts += _frame(x0, x1, 0.0, top, x_label, y_label)
    for index, (name, line) in enumerate(lines.items()):
        color = PALETTE[index % len(PALETTE)]
        if dots:
            parts += [
                f'<circle cx="{xy(p).split(",")[0]}" cy="{xy(p).split(",")[1]}" r="1.6" fill="{color}"/>'
                for p in line
            ]
        else:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.2" points="{" ".join(xy(p) for p in line)}"><title>{_e(name)}</title></polyline>'
            )
        if index < 12:
            y = _TOP + 12 + index * 14
            parts.append(
                f'<rect x="{_W - _RIGHT + 10}" y="{y - 8}" width="10" height="8" fill="{color}"/>'
            )
            parts.append(f'<text x="{_W - _RIGHT + 24}" y="{y}">{_e(name[:18])}</text>')
    if guide is not None:
        guide_y = xy((x0, guide[1])).split(",")[1]
        parts.append(
            f'<line x1="{_LEFT}" y1="{guide_y}" x2="{_LEFT + width}" y2="{guide_y}" stroke="#b42318" '
            f'stroke-dasharray="5,4"><title>{_e(guide[0])}</title></line>'
        )
        parts.append(f'<text x="{_W - _RIGHT + 10}" y="{guide_y}">{_e(guide[0][:22])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _heat_color(value: float) -> str:
    """0 % pale blue to 100 % dark red."""
    share = min(max(value / 100.0, 0.0), 1.0)
    red, green, blue = (
        int(235 * share + 230 * (1 - share)),
        int(60 * share + 238 * (1 - share)),
        int(50 * share + 250 * (1 - share)),
    )
    return f"#{red:02x}{green:02x}{blue:02x}"


def heatmap(
    rows: Sequence[str],
    values: Sequence[Sequence[float | None]],
    start: float,
    bin_seconds: float,
    title: str = "",
) -> str:
    """Rows (cores) x time bins, each cell coloured by its utilization (0-100 %)."""
    if not rows or not values or not values[0]:
        return ""
    bins = len(values[0])
    row_height = max(4.0, min(16.0, 320.0 / len(rows)))
    height = max(row_height * len(rows), 76.0)
    width = _W - _LEFT - _RIGHT
    cell = width / bins
    total = _TOP + height + _BOTTOM
    parts = [f'<svg viewBox="0 0 {_W} {total:.0f}" role="img">', f"<title>{_e(title)}</title>"]
    for r, (name, line) in enumerate(zip(rows, values, strict=True)):
        y = _TOP + r * row_height
        if len(rows) <= 32 or r % math.ceil(len(rows) / 32) == 0:
            parts.append(
                f'<text x="{_LEFT - 4}" y="{y + row_height * 0.8:.1f}" text-anchor="end">{_e(name)}</text>'
            )
        for b, value in enumerate(line):
            if value is not None:
                parts.append(
                    f'<rect x="{_LEFT + b * cell:.2f}" y="{y:.2f}" width="{cell + 0.3:.2f}" height="{row_height:.2f}" fill="{_heat_color(value)}"/>'
                )
    for i in range(6):
        x = _LEFT + width * i / 5
        parts.append(
            f'<text x="{x:.1f}" y="{_TOP + height + 16:.1f}" text-anchor="middle">{_e(_tick(start + bins * bin_seconds * i / 5))}</text>'
        )
    for i, share in enumerate((0, 25, 50, 75, 100)):
        y = _TOP + 10 + i * 14
        parts.append(
            f'<rect x="{_W - _RIGHT + 10}" y="{y - 8}" width="10" height="8" fill="{_heat_color(share)}"/>'
        )
        parts.append(f'<text x="{_W - _RIGHT + 24}" y="{y}">{share} %</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram_chart(
    edges: Sequence[float], counts: Sequence[float], *, x_label: str, title: str = ""
) -> str:
    """Bars of ``counts`` between consecutive ``edges``."""
    if not counts:
        return ""
    top = max(counts) * 1.05 or 1.0
    x0, x1 = edges[0], edges[-1] if edges[-1] > edges[0] else edges[0] + 1
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    bar = width / len(counts)
    parts = [f'<svg viewBox="0 0 {_W} {_H}" role="img">', f"<title>{_e(title)}</title>"]
    parts += _frame(x0, x1, 0.0, top, x_label, "steps")
    for i, count in enumerate(counts):
        h = count / top * height
        parts.append(
            f'<rect x="{_LEFT + i * bar + 0.5:.1f}" y="{_TOP + height - h:.1f}" width="{max(bar - 1, 0.5):.1f}" height="{h:.1f}" fill="{PALETTE[0]}"><title>{count:g}</title></rect>'
        )
    parts.append("</svg>")
    return "".join(parts)


def stacked_bar(parts_in: Mapping[str, float], title: str = "") -> str:
    """One horizontal bar split by share (values are percents summing to about 100)."""
    total = sum(v for v in parts_in.values() if v > 0) or 1.0
    width = _W - _LEFT - _RIGHT
    parts = [f'<svg viewBox="0 0 {_W} 60" role="img">', f"<title>{_e(title)}</title>"]
    x = float(_LEFT)
    for index, (name, value) in enumerate(parts_in.items()):
        w = max(value, 0.0) / total * width
        color = PALETTE[index % len(PALETTE)]
        parts.append(
            f'<rect x="{x:.1f}" y="8" width="{w:.1f}" height="22" fill="{color}"><title>{_e(name)}: {value:.1f} %</title></rect>'
        )
        parts.append(
            f'<rect x="{_LEFT + index * 150}" y="42" width="10" height="8" fill="{color}"/>'
        )
        parts.append(f'<text x="{_LEFT + index * 150 + 14}" y="50">{_e(name)} {value:.1f} %</text>')
        x += w
    parts.append("</svg>")
    return "".join(parts)
