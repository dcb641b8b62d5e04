"""The tuning report's figures as PNG, drawn with matplotlib (the ``plot`` extra, imported here
only when a figure is drawn) from :class:`~trainops.tuning.analysis.TuningAnalysis` data.

User strings (the job's and metric's names, parameter names, categorical values) are drawn as
plain text: each ``$`` is escaped, so it is a dollar sign, not the start of a formula that could
fail to parse (math mode stays on for the axes' own tick labels, such as a log axis's 10^-2).
"""

from __future__ import annotations

import io
import math
from typing import Any

from trainops.tuning.analysis._data import Slice, TuningAnalysis

__all__ = ["PLOT_NAMES", "plot_pngs"]

#: The figures, by file stem, in the order the report shows them.
PLOT_NAMES = ("objective", "slices", "importance")
_COLOURS = {"Completed": "tab:blue", "Stopped": "tab:orange"}


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "the tuning report's plots need matplotlib: pip install 'trainops[plot]'"
        ) from None
    return plt


def plot_pngs(analysis: TuningAnalysis) -> dict[str, bytes]:
    """Each figure of :data:`PLOT_NAMES` as PNG bytes (ImportError without matplotlib)."""
    plt = _pyplot()
    drawn = {
        "objective": _objective(plt, analysis),
        "slices": _slices(plt, analysis),
        "importance": _importance(plt, analysis),
    }
    return {name: _png(plt, figure) for name, figure in drawn.items()}


def _plain(text: str, limit: int = 40) -> str:
    """A user string shown as itself: at most ``limit`` characters, every ``$`` escaped."""
    return text[:limit].replace("$", r"\$")


def _png(plt: Any, figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def _objective(plt: Any, analysis: TuningAnalysis) -> Any:
    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    for status, colour in (*_COLOURS.items(), ("other", "tab:grey")):
        shown = [t for t in analysis.trials if t.objective is not None
                 and (t.status == status or (status == "other" and t.status not in _COLOURS))]  # fmt: skip
        if shown:
            axes.scatter([t.number for t in shown], [t.objective for t in shown], s=18,
                         color=colour, label=status)  # fmt: skip
    best = [(t.number, t.best_so_far) for t in analysis.trials if t.best_so_far is not None]
    if best:
        axes.step([n for n, _ in best], [v for _, v in best], where="post", color="tab:red",
                  label="best so far")  # fmt: skip
        axes.legend(loc="best", fontsize=8)
    axes.set_xlabel("trial number")
    axes.set_ylabel(f"{_plain(analysis.metric_name)} ({analysis.objective_type})")
    axes.set_title(f"Objective per trial: {_plain(analysis.name)}", fontsize=10)
    return figure


def _slices(plt: Any, analysis: TuningAnalysis) -> Any:
    count = max(1, len(analysis.slices))
    columns = min(3, count)
    rows = math.ceil(count / columns)
    figure, grid = plt.subplots(rows, columns, figsize=(4 * columns, 3.2 * rows), dpi=100,
                                squeeze=False)  # fmt: skip
    for index, axes in enumerate(grid.flat):
        if index < len(analysis.slices):
            _slice(axes, analysis.slices[index], _plain(analysis.metric_name))
        else:
            axes.set_visible(False)
    return figure


def _slice(axes: Any, found: Slice, metric: str) -> None:
    if found.scale == "Categorical":
        labels = sorted({str(p.value) for p in found.points})
        where = {label: i for i, label in enumerate(labels)}
        xs: list[float] = [float(where[str(p.value)]) for p in found.points]
        axes.set_xticks(range(len(labels)), [_plain(label, 20) for label in labels], fontsize=8)
    else:
        xs = [float(p.value) for p in found.points]
        if found.scale == "Logarithmic" and xs and min(xs) > 0:
            axes.set_xscale("log")
    colours = [_COLOURS.get(p.status, "tab:grey") for p in found.points]
    axes.scatter(xs, [p.objective for p in found.points], s=16, c=colours)
    axes.set_xlabel(_plain(found.parameter), fontsize=9)
    axes.set_ylabel(metric, fontsize=9)


def _importance(plt: Any, analysis: TuningAnalysis) -> Any:
    ranked = analysis.importance
    figure, axes = plt.subplots(figsize=(6, 0.5 + 0.4 * max(1, len(ranked))), dpi=100)
    if ranked:
        names = [_plain(i.parameter) for i in reversed(ranked)]
        axes.barh(range(len(ranked)), [i.importance for i in reversed(ranked)])
        axes.set_yticks(range(len(ranked)), names, fontsize=8)
        axes.set_xlim(0, 1)
    else:
        axes.text(0.5, 0.5, "too few Completed trials", ha="center", va="center")
        axes.set_axis_off()
    axes.set_xlabel(f"importance ({analysis.importance_trials} Completed trials)")
    return figure
