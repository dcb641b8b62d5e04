"""The report at job end (the profiler-report service) and the report's route, on a real store
and a real control plane with fake agents; profiler data is written with SeriesWriter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control import conftest as _control
from tests.control._harness import ControlPlane, control_plane, wait_for
from tests.report._synthetic import (
    T0,
    Profile,
    Synthetic,
    record_rule,
    standard_job,
    step_rows,
    steps_dir,
    system_dir,
    system_rows,
    write_meta,
    write_series,
)
from trainops._settings import Settings
from trainops.control.services import SERVICES, ServiceContext
from trainops.report import SERVICE_NAME, ProfilerReportService, report_prefix

settings = _control.settings


class _Clock:
    def __init__(self) -> None:
        self.now = T0 + 700

    def __call__(self) -> float:
        return self.now


def _service(syn: Synthetic, clock: _Clock) -> ProfilerReportService:
    context = ServiceContext(syn.store, syn.settings, lambda _n, _m: False, clock)
    return ProfilerReportService(context, wait_for_rules=60, wait_without_rules=5)


def _page(syn: Synthetic) -> Path:
    prefix = report_prefix(syn.job).removeprefix("file://")
    return Path(prefix) / "profiler-report.html"


def _changed(service: ProfilerReportService, syn: Synthetic) -> None:
    job = syn.store.get_job(syn.job.name)
    assert job is not None
    service.job_changed(job)


def test_the_report_waits_for_final_rule_evaluations(tmp_path: Path) -> None:
    syn, clock = standard_job(tmp_path), _Clock()
    service = _service(syn, clock)
    record_rule(syn, "ProfilerReport", "InProgress")
    _changed(service, syn)
    clock.now += 30
    service.tick()
    assert not _page(syn).exists()
    record_rule(syn, "ProfilerReport", "IssuesFound", recommendation="fewer workers")
    service.tick()
    page = _page(syn)
    assert page.exists() and "fewer workers" in page.read_text()
    data = json.loads(page.with_name("profiler-report.json").read_text())
    assert data["sections"]["rules"]["rules"][0]["status"] == "IssuesFound"
    artifacts = {a.name: a.uri for a in syn.store.artifacts(syn.job.name)}
    assert artifacts["profiler_report"] == page.as_uri()
    assert "rule-output/ProfilerReport/profiler-output" in artifacts["profiler_report"]


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    syn, clock = standard_job(tmp_path), _Clock()
    service = _service(syn, clock)
    record_rule(syn, "ProfilerReport", "InProgress")
    _changed(service, syn)
    clock.now += 59
    service.tick()
    assert not _page(syn).exists()
    clock.now += 2
    service.tick()
    assert _page(syn).exists()
    assert (
        json.loads(_page(syn).with_suffix(".json").read_text())["sections"]["rules"]["final"]
        is False
    )


def test_without_any_rule_evaluation_it_writes_after_a_short_wait(tmp_path: Path) -> None:
    syn, clock = standard_job(tmp_path), _Clock()
    service = _service(syn, clock)
    _changed(service, syn)
    assert not _page(syn).exists()
    clock.now += 5
    service.tick()
    assert _page(syn).exists()


@pytest.mark.parametrize("case", ["running", "no ProfilerReport rule"])
def test_no_report_for_a_running_job_or_one_without_the_rule(tmp_path: Path, case: str) -> None:
    if case == "running":
        syn = standard_job(tmp_path, status="InProgress")
    else:
        syn = standard_job(tmp_path, rules=[{"rule": "StepOutlier"}])
    clock = _Clock()
    service = _service(syn, clock)
    _changed(service, syn)
    clock.now += 600
    service.tick()
    assert not _page(syn).exists() and syn.store.artifacts(syn.job.name) == []


def test_the_service_is_registered() -> None:
    assert SERVICE_NAME in SERVICES


@pytest.fixture
def plane(settings: Settings) -> Iterator[ControlPlane]:
    with control_plane(settings) as running:
        yield running


def _write_profile(root: Path) -> None:
    profile = Profile(root)
    write_meta(profile)
    write_series(profile, system_dir("algo-1"), *system_rows(300, 2, lambda i, c: 60.0, start=0.0))
    write_series(profile, steps_dir("algo-1", 0), *step_rows(100, start=1.0))


def _profiler_root(plane: ControlPlane, name: str) -> Path:
    output = plane.describe(name)["OutputDataConfig"]["S3OutputPath"]
    return Path(output.removeprefix("file://")) / name / "profiler-output"


def test_the_route_answers_the_report_or_one_clear_404(plane: ControlPlane) -> None:
    unknown = plane.client.get("/api/v1/jobs/nope/profiler-report")
    assert (
        unknown.status_code == 404 and "no job named 'nope'" in unknown.json()["detail"]["message"]
    )
    plane.submit("bare", {"FAKE_LINES": "1"})
    plane.wait_ended("bare")
    empty = plane.client.get("/api/v1/jobs/bare/profiler-report")
    assert empty.status_code == 404
    message = empty.json()["detail"]["message"]
    assert (
        message.startswith("job 'bare' has no profiler data under file://")
        and "profiler_config is off" in message
    )
    _write_profile(_profiler_root(plane, "bare"))
    found = plane.client.get("/api/v1/jobs/bare/profiler-report")
    assert found.status_code == 200, found.text
    data = found.json()
    assert data["job"]["name"] == "bare" and data["job"]["status"] == "Completed"
    assert data["sections"]["step_durations"]["ranks"][0]["train"]["stats"]["count"] == 100


def test_a_job_with_the_profiler_report_rule_gets_its_report_at_the_end(
    plane: ControlPlane,
) -> None:
    plane.submit("ruled", {"FAKE_LINES": "40", "FAKE_LINE_DELAY": "0.05"}, rules=["ProfilerReport"])
    plane.wait_secondary("ruled", "Training")
    _write_profile(_profiler_root(plane, "ruled"))
    plane.wait_ended("ruled")

    def listed() -> str | None:
        artifacts = plane.describe("ruled")["Artifacts"]
        return next((a["Uri"] for a in artifacts if a["Name"] == "profiler_report"), None)

    uri = wait_for(listed, 60, "the profiler_report artifact")
    page = Path(uri.removeprefix("file://"))
    assert uri.endswith("/ruled/rule-output/ProfilerReport/profiler-output/profiler-report.html")
    assert "Profiler report: ruled" in page.read_text()
    assert json.loads(page.with_suffix(".json").read_text())["job"]["status"] == "Completed"


def test_the_report_goes_beside_the_rules_result_of_its_rule(tmp_path: Path) -> None:
    syn = standard_job(tmp_path, rules=[{"rule": "ProfilerReport", "name": "report-1"}])
    assert report_prefix(syn.job) == f"{syn.job.output_prefix}/rule-output/report-1/profiler-output"


def test_a_closing_control_plane_writes_the_pending_report(tmp_path: Path) -> None:
    syn, clock = standard_job(tmp_path), _Clock()
    service = _service(syn, clock)
    record_rule(syn, "ProfilerReport", "InProgress")
    _changed(service, syn)
    assert not _page(syn).exists()
    service.close()
    assert _page(syn).exists()
    assert [a.name for a in syn.store.artifacts(syn.job.name)] == ["profiler_report"]
