"""The rules service on a real store and real profiler chunks, driven tick by tick with a set clock.

The end-to-end test (``test_live.py``) runs the same service inside a real control plane; here
each step is explicit: what a tick evaluates, when actions run, what the rows say.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.rules import _data
from trainops._settings import Settings
from trainops.control.services import SERVICES, ServiceContext
from trainops.profiler import MODE_TRAIN, SeriesWriter
from trainops.rules import RULES, RulesService, StepOutlier
from trainops.rules._base import ProfilerData, RuleResult
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore, RuleEvaluation


class Clock:
    def __init__(self) -> None:
        self.now = _data.T0

    def __call__(self) -> float:
        return self.now


class Plane:
    """A store, a clock and the stops a service asked for."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.store = MetadataStore(tmp_path / "trainops.db")
        self.clock = Clock()
        self.stops: list[tuple[str, str]] = []
        self.output = (tmp_path / "out" / "job-a").as_uri()
        self.steps_dir = tmp_path / "out/job-a/profiler-output/framework/steps/algo-1/rank-0"
        self.context = ServiceContext(self.store, Settings.load(), self._stop, self.clock)

    def _stop(self, name: str, message: str) -> bool:
        self.stops.append((name, message))
        return True

    def submit(self, rules: list[Any]) -> JobRecord:
        spec = JobSpec(entry_point="train.py", rules=rules).view()
        return self.store.create_job(
            name="job-a",
            spec=spec,
            code_uri="file:///code.tar.gz",
            output_prefix=self.output,
            max_attempts=1,
            status="InProgress",
            secondary_status="Training",
            message="training",
            now=self.clock.now,
        )

    def end(self) -> JobRecord:
        return self.store.set_secondary(
            "job-a",
            "Completed",
            "done",
            self.clock.now,
            final=True,
            status="Completed",
            training_end_time=self.clock.now,
        )

    def write_steps(self, durations: list[float], sequence: int) -> None:
        writer = SeriesWriter(
            self.steps_dir,
            {"kind": "steps"},
            ["time", "step", "mode", "duration"],
            prefix=f"1-{sequence}-",
        )
        for number, duration in enumerate(durations):
            writer.append([self.clock.now + number * 0.1, number, MODE_TRAIN, duration])
        writer.close()

    def row(self, name: str = "StepOutlier") -> RuleEvaluation:
        rows = {r.name: r for r in self.store.rule_evaluations("job-a")}
        return rows[name]


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    made = Plane(tmp_path)
    yield made
    made.store.close()


def _outlier_rule(tmp_path: Path, interval_us: int = 0) -> dict[str, Any]:
    marker = tmp_path / "command-ran"
    script = f"import sys; open({str(marker)!r}, 'a').write(sys.stdin.read() + '\\n')"
    return {
        "rule": "StepOutlier",
        "rule_parameters": {"scan_interval_us": interval_us},
        "actions": ["stop_training", {"command": [sys.executable, "-c", script]}],
    }


def test_the_package_registers_the_service() -> None:
    assert SERVICES["rules"].__name__ == "rules_service"


def test_in_progress_then_issues_found_then_final(plane: Plane, tmp_path: Path) -> None:
    service = RulesService(plane.context)
    job = plane.submit([_outlier_rule(tmp_path), "OverallFrameworkMetrics"])
    service.job_changed(job)
    first = plane.row()
    assert (first.status, first.status_details) == (
        "InProgress",
        "waiting for the first evaluation",
    )
    assert first.kind == "profiler" and first.rule == "StepOutlier"

    plane.write_steps(_data.steady_steps(100), 0)
    service.tick()
    steady = plane.row()
    assert steady.status == "InProgress" and "0 of 100 steps" in steady.status_details
    assert steady.result["result"]["status"] == "NoIssuesFound"
    assert plane.stops == []

    plane.clock.now += 20
    plane.write_steps(_data.outlier_steps(300), 1)
    service.tick()
    found = plane.row()
    assert found.status == "IssuesFound" and "more than 10" in found.status_details
    assert [a["type"] for a in found.result["actions"]] == ["stop_training", "command"]
    assert all(a["ok"] for a in found.result["actions"]), found.result["actions"]
    assert plane.stops == [("job-a", f"Stopped by rule StepOutlier: {found.status_details}")]
    ran = (tmp_path / "command-ran").read_text().splitlines()
    assert len(ran) == 1 and json.loads(ran[0])["rule_name"] == "StepOutlier"

    service.tick()  # found already: the actions do not run again
    assert len(plane.stops) == 1
    assert len((tmp_path / "command-ran").read_text().splitlines()) == 1

    service.job_changed(plane.end())
    final = plane.row()
    assert final.status == "IssuesFound" and final.result["evaluations"] == 4
    assert plane.row("OverallFrameworkMetrics").status == "NoIssuesFound"
    assert service.jobs == {}
    output = json.loads(
        Path(tmp_path / "out/job-a/rule-output/StepOutlier/result.json").read_text()
    )
    assert output["status"] == "IssuesFound" and output["found"]["status"] == "IssuesFound"


def test_a_short_job_gets_a_final_verdict(plane: Plane, tmp_path: Path) -> None:
    service = RulesService(plane.context)
    plane.submit(["StepOutlier", "Dataloader"])
    plane.write_steps(_data.steady_steps(50), 0)
    # The service never saw it run: it hears of it once it has ended.
    service.job_changed(plane.end())
    assert plane.row().status == "NoIssuesFound"
    dataloader = plane.row("Dataloader")
    assert dataloader.status == "NoIssuesFound"
    assert dataloader.status_details == "no dataloader worker count was recorded yet"
    # Heard again (another state change): nothing is evaluated twice.
    before = plane.row().last_modified_time
    plane.clock.now += 5
    service.job_changed(plane.store.get_job("job-a"))  # type: ignore[arg-type]
    assert plane.row().last_modified_time == before


def test_rules_are_scanned_at_their_interval(plane: Plane, tmp_path: Path) -> None:
    service = RulesService(plane.context)
    service.job_changed(plane.submit([_outlier_rule(tmp_path, interval_us=60_000_000)]))
    service.tick()
    assert plane.row().result["evaluations"] == 1
    plane.clock.now += 59
    service.tick()
    assert plane.row().result["evaluations"] == 1
    plane.clock.now += 2
    service.tick()
    assert plane.row().result["evaluations"] == 2


def test_a_rule_that_raises_is_an_error_and_is_tried_again(plane: Plane, tmp_path: Path) -> None:
    class Broken(StepOutlier):
        def _evaluate(self, data: ProfilerData) -> RuleResult:
            raise ZeroDivisionError("float division by zero\nsecond line")

    service = RulesService(plane.context)
    every_tick = {"rule": "StepOutlier", "rule_parameters": {"scan_interval_us": 0}}
    with RULES.added("StepOutlier", Broken, replace=True):
        service.job_changed(plane.submit([every_tick]))
        service.tick()
        row = plane.row()
        assert (row.status, row.status_details) == (
            "Error",
            "ZeroDivisionError: float division by zero",
        )
        plane.clock.now += 1
        service.tick()  # tried at every scan
        assert plane.row().last_modified_time == plane.clock.now
        service.job_changed(plane.end())
        assert plane.row().status == "Error"
    # A control plane that made the rule again (fixed) settles it at the job's end.
    RulesService(plane.context).job_changed(plane.store.get_job("job-a"))  # type: ignore[arg-type]
    assert plane.row().status == "NoIssuesFound"


def test_a_restarted_control_plane_adopts_running_jobs_without_acting_twice(
    plane: Plane, tmp_path: Path
) -> None:
    service = RulesService(plane.context)
    service.job_changed(plane.submit([_outlier_rule(tmp_path)]))
    plane.write_steps(_data.outlier_steps(300), 0)
    service.tick()
    assert plane.row().status == "IssuesFound" and len(plane.stops) == 1
    service.close()

    restarted = RulesService(plane.context)
    restarted.tick()  # the first tick adopts the running job
    assert set(restarted.jobs) == {"job-a"}
    row = plane.row()
    assert row.status == "IssuesFound" and len(row.result["actions"]) == 2
    assert len(plane.stops) == 1
    assert len((tmp_path / "command-ran").read_text().splitlines()) == 1


def test_a_job_that_ended_as_the_control_plane_closed_is_settled_by_the_next(
    plane: Plane, tmp_path: Path
) -> None:
    service = RulesService(plane.context)
    service.job_changed(plane.submit([_outlier_rule(tmp_path)]))
    plane.write_steps(_data.steady_steps(100), 0)
    service.tick()
    assert plane.row().status == "InProgress"
    plane.end()  # the service closed before it heard of it
    service.close()
    RulesService(plane.context).tick()
    assert plane.row().status == "NoIssuesFound"


def test_a_job_whose_data_cannot_be_read_shows_errors(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainops._errors import ConfigError
    from trainops.rules import _tracking

    def no_store(uri: str, settings: Settings) -> object:
        raise ConfigError(f"no credentials for {uri}\nsecond line")

    monkeypatch.setattr(_tracking, "store_for", no_store)
    service = RulesService(plane.context)
    service.job_changed(plane.submit(["StepOutlier"]))
    row = plane.row()
    assert row.status == "Error"
    assert row.status_details == (
        f"cannot read the job's profiler data: ConfigError: no credentials for {plane.output}"
    )
    assert service.jobs == {}


class ControlPlaneDied(BaseException):
    """The control plane's process ending at this point (nothing after it runs)."""


def test_a_finding_whose_actions_a_stopped_control_plane_left_is_acted_on_by_the_next(
    plane: Plane, tmp_path: Path
) -> None:
    # The first control plane queues the command for the job's host and dies while it waits:
    # the queue was in its memory. The next one sends the same action again (same finding,
    # same time, so the same action id on the host) and records what it did, once.
    sent: list[tuple[list[str], str, dict[str, str]]] = []

    def dies_waiting(job: str, argv: list[str], stdin: str, variables: Any, timeout: float) -> Any:
        sent.append((argv, stdin, variables))
        raise ControlPlaneDied

    def host_ran_it(job: str, argv: list[str], stdin: str, variables: Any, timeout: float) -> Any:
        sent.append((argv, stdin, variables))
        return {"host": "algo-1", "ran": True, "exit_code": 0, "output": "notified"}

    rule = {"rule": "StepOutlier", "rule_parameters": {"scan_interval_us": 0}}
    job = plane.submit([rule | {"actions": [{"command": ["notify"]}]}])
    first = RulesService(dataclasses.replace(plane.context, run_on_host=dies_waiting))
    first.job_changed(job)
    plane.write_steps(_data.outlier_steps(300), 0)
    with pytest.raises(ControlPlaneDied):
        first.tick()
    left = plane.row()
    assert left.status == "IssuesFound" and left.result["acting"] is True
    assert left.result["actions"] == []

    plane.clock.now += 60
    restarted = RulesService(dataclasses.replace(plane.context, run_on_host=host_ran_it))
    restarted.tick()  # adopts the running job and acts on its finding
    row = plane.row()
    assert row.result["acting"] is False
    assert row.result["actions"] == [
        {"type": "command", "ok": True, "detail": "notify exited with 0 on algo-1: notified"}
    ]
    assert len(sent) == 2 and sent[0] == sent[1]  # the very same action: one run on the host
    restarted.tick()
    assert len(sent) == 2
