"""The report page's cost section: the recorded job's figures (tests/cost/_recorded.py), the
spot price labelled an estimate, and strings from the job escaped."""

from __future__ import annotations

from pathlib import Path

from tests.cost._recorded import NAME, finish, open_store
from trainops.catalog._settings import SpotPriceSettings
from trainops.cost import job_spot_cost
from trainops.report._html_cost import cost_section
from trainops.report._html_sections import SECTION_RENDERERS

HOSTILE = "<script>alert('spot')</script>"


def _cost(tmp_path: Path, per_hour: float | None = 2.0) -> dict[str, object]:
    store = open_store(tmp_path / "trainops.db")
    try:
        finish(store)
        return job_spot_cost(store, NAME, SpotPriceSettings(), 9999.0, per_hour).to_json()
    finally:
        store.close()


def test_the_section_shows_the_figures_and_labels_the_estimate(tmp_path: Path) -> None:
    page = cost_section(_cost(tmp_path))
    assert "1850 billable seconds of 2030 training seconds" in page
    assert _cells("3.931") in page and _cells("1.179") in page  # on-demand, spot (USD)
    assert "an estimate, not a quote: on-demand less 70%" in page
    assert page.count("<tr>") == 3 * 3  # prices, interruptions, interval: a header, two rows
    assert _cells("300", "160", "yes") in page  # the first interruption
    assert _cells("120", "0.1222", "160") in page  # tau* and its overhead


def _cells(*values: str) -> str:
    return "".join(f'<td class="">{v}</td>' for v in values)


def test_strings_from_the_job_are_escaped(tmp_path: Path) -> None:
    cost = _cost(tmp_path)
    cost["Interruptions"][0]["Message"] = HOSTILE  # type: ignore[index]
    page = cost_section(cost)
    assert "<script>" not in page and "&lt;script&gt;alert(&#x27;spot&#x27;)" in page


def test_without_data_or_a_measure_it_says_why(tmp_path: Path) -> None:
    assert "no cost data" in cost_section(None)
    assert "rate" in cost_section({**_cost(tmp_path), "CheckpointInterval": {
        "BestIntervalSeconds": None, "CheckpointSeconds": 4.0}})  # fmt: skip
    assert [key for key, _, _ in SECTION_RENDERERS][:3] == ["summary", "advice", "cost"]
