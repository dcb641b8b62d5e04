"""Small SVG charts of the web UI's pages, drawn on the server from plain data: points with a
step line (objective per trial and the best so far), a scatter (one slice), parallel
coordinates and horizontal bars.

Every label and title passes through :func:`~trainops.server.ui.esc`, so a parameter or metric
name cannot break out of the markup; the charts use classes of ``charts.css`` and SVG
presentation attributes only (no ``style=``: the pages' CSP forbids inline styles).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainops.server.ui._page import esc

__all__ = ["Axis", "bars", "parallel", "points_and_line", "scaling", "scatter"]

_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 640, 220, 64, 16, 12, 40


@dataclass(frozen=True)
class Axis:
    """A numeric axis from ``low`` to ``high`` (logarithmic where ``log`` and both are > 0)."""

    low: float
    high: float
    log: bool = False
    whole: bool = False

    @classmethod
    def over(cls, values: Sequence[float], *, log: bool = False) -> Axis:
        finite = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
        if not finite:
            return cls(0.0, 1.0)
        low, high = min(finite), max(finite)
        if high == low:
            pad = abs(low) * 0.05 or 1.0
            low, high = (low / 2, high * 2) if log else (low - pad, high + pad)
        return cls(low, high, log)

    def share(self, value: float) -> float:
        """Where ``value`` lies, 0 at ``low`` and 1 at ``high``."""
        if self.log:
            value = max(value, self.low)
            return (math.log(value) - math.log(self.low)) / (
                math.log(self.high) - math.log(self.low)
            )
        return (value - self.low) / (self.high - self.low)

    def ticks(self, count: int = 4) -> list[float]:
        if self.whole:  # counts (trial numbers): whole ticks only
            return sorted(
                {
                    float(round(self.low + (self.high - self.low) * i / count))
                    for i in range(count + 1)
                }
            )
        if self.log:
            a, b = math.log(self.low), math.log(self.high)
            return [math.exp(a + (b - a) * i / count) for i in range(count + 1)]
        return [self.low + (self.high - self.low) * i / count for i in range(count + 1)]


def number(value: float | None) -> str:
    """A value as a chart or table shows it: 4 significant digits."""
    return "" if value is None else f"{value:.4g}"


def _open(title: str, height: int = _H) -> list[str]:
    return [f'<svg class="chart" viewBox="0 0 {_W} {height}" role="img" aria-label="{esc(title)}">',
            f"<title>{esc(title)}</title>"]  # fmt: skip


def _frame(x: Axis, y: Axis, x_label: str, y_label: str, *, x_ticks: bool = True) -> list[str]:
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    parts = [f'<rect class="frame" x="{_LEFT}" y="{_TOP}" width="{width}" height="{height}"/>']
    for value in y.ticks():
        top = _TOP + height * (1 - y.share(value))
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + width}" y1="{top:.1f}" y2="{top:.1f}"/>'
                     f'<text x="{_LEFT - 4}" y="{top + 4:.1f}" text-anchor="end">{esc(number(value))}</text>')  # fmt: skip
    for value in x.ticks(5) if x_ticks else []:
        left = _LEFT + width * x.share(value)
        parts.append(f'<text x="{left:.1f}" y="{_H - 24}" text-anchor="middle">{esc(number(value))}</text>')  # fmt: skip
    parts.append(f'<text class="axis" x="{_LEFT + width / 2:.1f}" y="{_H - 6}" text-anchor="middle">{esc(x_label)}</text>'
                 f'<text class="axis" x="12" y="{_TOP + height / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {_TOP + height / 2:.1f})">{esc(y_label[:40])}</text>')  # fmt: skip
    return parts


def _xy(x: Axis, y: Axis, px: float, py: float) -> tuple[float, float]:
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    return _LEFT + width * x.share(px), _TOP + height * (1 - y.share(py))


def _dot(cx: float, cy: float, kind: str, tip: str) -> str:
    return f'<circle class="dot {kind}" cx="{cx:.1f}" cy="{cy:.1f}" r="3.5"><title>{esc(tip)}</title></circle>'  # fmt: skip


def points_and_line(
    points: Sequence[tuple[float, float, str]],
    line: Sequence[tuple[float, float]],
    *,
    x_label: str,
    y_label: str,
    title: str,
) -> str:
    """Dots ``(x, y, tip)`` and a step line through ``line`` (the best so far)."""
    if not points:
        return '<p class="empty">No trial has an objective yet.</p>'
    found = Axis.over([p[0] for p in points])
    x = Axis(found.low, found.high, whole=all(float(p[0]).is_integer() for p in points))
    y = Axis.over([p[1] for p in points] + [p[1] for p in line])
    parts = _open(title) + _frame(x, y, x_label, y_label)
    steps: list[str] = []
    for i, (px, py) in enumerate(line):
        cx, cy = _xy(x, y, px, py)
        if i:
            steps.append(f"{cx:.1f},{steps[-1].split(',')[1]}")
        steps.append(f"{cx:.1f},{cy:.1f}")
    if steps:
        parts.append(f'<polyline class="best" fill="none" points="{" ".join(steps)}"><title>best so far</title></polyline>')  # fmt: skip
    parts += [_dot(*_xy(x, y, px, py), "trial", tip) for px, py, tip in points]
    return "".join(parts) + "</svg>"


def scatter(
    points: Sequence[tuple[float, float, str]],
    *,
    x: Axis,
    x_label: str,
    y_label: str,
    title: str,
    categories: Sequence[str] = (),
) -> str:
    """Dots ``(x, y, tip)``; with ``categories``, x is an index into them (labelled so)."""
    y = Axis.over([p[1] for p in points])
    parts = _open(title) + _frame(x, y, x_label, y_label, x_ticks=not categories)
    if categories:  # an index says nothing: name the categories instead
        width = _W - _LEFT - _RIGHT
        parts += [f'<text class="cat" x="{_LEFT + width * x.share(i):.1f}" y="{_H - 24}" text-anchor="middle">{esc(c[:16])}</text>'
                  for i, c in enumerate(categories)]  # fmt: skip
    parts += [_dot(*_xy(x, y, px, py), "trial", tip) for px, py, tip in points]
    return "".join(parts) + "</svg>"


def parallel(
    axes: Sequence[tuple[str, Axis, Sequence[str]]],
    lines: Sequence[tuple[Sequence[float | None], float, str]],
    *,
    title: str,
) -> str:
    """Parallel coordinates: one vertical axis per ``(name, axis, categories)`` and one
    polyline per ``(values, shade 0..1, tip)`` (a missing value breaks the line there)."""
    if len(axes) < 2 or not lines:
        return '<p class="empty">Not enough trials with an objective yet.</p>'
    height = _H + 20
    top, bottom = _TOP + 14, height - _BOTTOM
    step = (_W - _LEFT - _RIGHT) / (len(axes) - 1)
    parts = _open(title, height)
    for i, (name, axis, categories) in enumerate(axes):
        left = _LEFT + step * i
        parts.append(f'<line class="pc-axis" x1="{left:.1f}" x2="{left:.1f}" y1="{top}" y2="{bottom}"/>'
                     f'<text class="axis" x="{left:.1f}" y="{top - 4}" text-anchor="middle">{esc(name[:18])}</text>')  # fmt: skip
        labels = categories or [number(v) for v in (axis.low, axis.high)]
        side, anchor = (3, "start") if i < len(axes) - 1 else (-3, "end")
        for j, label in enumerate(labels):
            share = j / max(len(labels) - 1, 1)
            parts.append(f'<text x="{left + side:.1f}" y="{bottom - (bottom - top) * share + 4:.1f}" text-anchor="{anchor}">{esc(label[:14])}</text>')  # fmt: skip
    for values, shade, tip in lines:
        coords = [
            f"{_LEFT + step * i:.1f},{bottom - (bottom - top) * min(max(axis.share(v), 0.0), 1.0):.1f}"
            for i, ((_, axis, _c), v) in enumerate(zip(axes, values, strict=True))
            if v is not None
        ]
        level = min(4, max(0, int(shade * 5)))
        parts.append(f'<polyline class="pc-line shade-{level}" fill="none" points="{" ".join(coords)}"><title>{esc(tip)}</title></polyline>')  # fmt: skip
    return "".join(parts) + "</svg>"


def bars(items: Sequence[tuple[str, float, str]], *, title: str) -> str:
    """Horizontal bars ``(label, share 0..1, value text)``."""
    if not items:
        return '<p class="empty">Not enough Completed trials yet.</p>'
    row, label_w = 22, 170
    height = row * len(items) + 8
    width = _W - label_w - 80
    parts = _open(title, height)
    for i, (label, share, text) in enumerate(items):
        y = 4 + i * row
        w = max(0.0, min(share, 1.0)) * width
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{esc(label[:24])}</text>'
                     f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}"><title>{esc(label)}: {esc(text)}</title></rect>'
                     f'<text x="{label_w + w + 6:.1f}" y="{y + 14}">{esc(text)}</text>')  # fmt: skip
    return "".join(parts) + "</svg>"


def scaling(
    points: Sequence[tuple[float, float, str]],
    ideal: Sequence[tuple[float, float]],
    *,
    x_label: str,
    y_label: str,
    title: str,
) -> str:
    """Dots ``(x, y, tip)`` and a straight dashed line through ``ideal`` (perfect scaling)."""
    if not points:
        return '<p class="empty">No configuration has a throughput yet.</p>'
    found = Axis.over([p[0] for p in points] + [p[0] for p in ideal])
    x = Axis(found.low, found.high, whole=all(float(p[0]).is_integer() for p in points))
    y = Axis.over([0.0] + [p[1] for p in points] + [p[1] for p in ideal])
    parts = _open(title) + _frame(x, y, x_label, y_label)
    if ideal:
        line = " ".join("{:.1f},{:.1f}".format(*_xy(x, y, px, py)) for px, py in ideal)
        parts.append(f'<polyline class="ideal" fill="none" points="{line}"><title>perfect scaling</title></polyline>')  # fmt: skip
    parts += [_dot(*_xy(x, y, px, py), "trial", tip) for px, py, tip in points]
    return "".join(parts) + "</svg>"
