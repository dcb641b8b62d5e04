"""The web UI's SVG charts (``pages/_charts``): where values land on an axis, and that every
label drawn from data is escaped (a parameter or metric name holding markup stays text)."""

from __future__ import annotations

import pytest

from tests.ui._jobs import HOSTILE
from trainops.server.ui.pages._charts import Axis, bars, parallel, points_and_line, scatter


def test_an_axis_places_values_linearly_or_by_their_logarithm() -> None:
    assert Axis(0.0, 10.0).share(2.5) == pytest.approx(0.25)
    assert Axis(0.001, 0.1, log=True).share(0.01) == pytest.approx(0.5)
    assert Axis.over([5.0, 5.0]).low < 5.0 < Axis.over([5.0, 5.0]).high  # one value: padded
    assert Axis.over([float("nan")]) == Axis(0.0, 1.0)
    assert Axis(0.0, 11.0, whole=True).ticks(5) == [0.0, 2.0, 4.0, 7.0, 9.0, 11.0]


def test_every_chart_escapes_the_text_it_is_given() -> None:
    drawn = [
        points_and_line([(0.0, 1.0, HOSTILE)], [(0.0, 1.0)], x_label=HOSTILE, y_label=HOSTILE,
                        title=HOSTILE),
        scatter([(0.0, 1.0, HOSTILE)], x=Axis(0.0, 1.0), x_label=HOSTILE, y_label="y",
                title=HOSTILE, categories=[HOSTILE, "b"]),
        parallel([(HOSTILE, Axis(0.0, 1.0), [HOSTILE]), ("y", Axis(0.0, 1.0), [])],
                 [([0.0, 1.0], 0.5, HOSTILE)], title=HOSTILE),
        bars([(HOSTILE, 0.5, HOSTILE)], title=HOSTILE),
    ]  # fmt: skip
    for svg in drawn:
        assert svg.startswith('<svg class="chart"') and svg.endswith("</svg>")
        assert (
            "<script" not in svg
            and "<i " not in svg
            and "onerror=" not in svg.replace("onerror=&quot;", "")
        )
        assert "&lt;script&gt;" in svg and "style=" not in svg


def test_a_chart_without_data_says_so() -> None:
    assert "No trial" in points_and_line([], [], x_label="x", y_label="y", title="t")
    assert "Not enough" in parallel([], [], title="t") and "Not enough" in bars([], title="t")
