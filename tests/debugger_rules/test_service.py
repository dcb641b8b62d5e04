"""The debugger-rules service on a real store and real tensor files, driven tick by tick with a
set clock: statuses, the final verdict, actions run once, a control-plane restart, describe."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.loaders
import numpy as np
import pytest

from tests.debugger_rules._series import Series, write_series
from trainops._settings import Settings
from trainops.control.services import SERVICES, ServiceContext
from trainops.debugger.format import mark_training_end
from trainops.rules import DebuggerRulesService, RulesService
from trainops.server._rule_views import debugger_sections, profiler_sections
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore, RuleEvaluation

T0 = 1_700_000_000.0


class Plane:
    """A store, a clock, the job's debug-output folder and the stops a service asked for."""

    def __init__(self, tmp_path: Path) -> None:
        self.store = MetadataStore(tmp_path / "trainops.db")
        self.now = T0
        self.stops: list[tuple[str, str]] = []
        self.output = (tmp_path / "out" / "job-a").as_uri()
        self.tensors = tmp_path / "out" / "job-a" / "debug-output"
        self.context = ServiceContext(self.store, Settings.load(), self._stop, lambda: self.now)

    def _stop(self, name: str, message: str) -> bool:
        self.stops.append((name, message))
        return True

    def submit(self, rules: list[Any], code_uri: str = "file:///code.tar.gz") -> JobRecord:
        spec = JobSpec(entry_point="train.py", rules=rules).view()
        return self.store.create_job(
            name="job-a",
            spec=spec,
            code_uri=code_uri,
            output_prefix=self.output,
            max_attempts=1,
            status="InProgress",
            secondary_status="Training",
            message="training",
            now=self.now,
        )

    def end(self) -> JobRecord:
        mark_training_end(self.tensors)
        return self.store.set_secondary(
            "job-a",
            "Completed",
            "done",
            self.now,
            final=True,
            status="Completed",
            training_end_time=self.now,
        )

    def gradients(self, steps: range, scale: float) -> None:
        series = Series()
        for step in steps:
            series.add(step, **{"gradient/fc.weight": np.full((4, 4), scale, np.float32)})
        write_series(self.tensors, series, end=False)

    def row(self, name: str) -> RuleEvaluation:
        return {r.name: r for r in self.store.rule_evaluations("job-a")}[name]


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    made = Plane(tmp_path)
    yield made
    made.store.close()


def test_the_package_registers_the_service() -> None:
    assert SERVICES["debugger-rules"].__name__ == "debugger_rules_service"


def test_in_progress_then_issues_found_then_stays(plane: Plane) -> None:
    service = DebuggerRulesService(plane.context)
    job = plane.submit([{"rule": "VanishingGradient", "actions": ["stop_training"]}])
    service.job_changed(job)
    assert plane.row("VanishingGradient").status == "InProgress"
    assert plane.row("VanishingGradient").kind == "debugger"
    service.tick()  # nothing written yet
    assert plane.row("VanishingGradient").status == "InProgress"
    plane.gradients(range(3), 0.1)
    service.tick()  # progress is written at most every 5 s
    assert plane.row("VanishingGradient").status_details == "waiting for the first evaluation"
    plane.now += 5
    service.tick()
    row = plane.row("VanishingGradient")
    assert (row.status, row.status_details) == (
        "InProgress",
        "no issue in 3 steps evaluated (up to step 2)",
    )
    plane.gradients(range(3, 5), 1e-12)
    plane.now += 1
    service.tick()
    row = plane.row("VanishingGradient")
    assert row.status == "IssuesFound"
    assert "gradient/fc.weight vanishes at step 3" in row.status_details
    assert plane.stops == [("job-a", plane.stops[0][1])]
    assert [a["type"] for a in row.result["actions"]] == ["stop_training"]
    service.tick()
    service.job_changed(plane.end())
    assert plane.row("VanishingGradient").status == "IssuesFound"
    assert len(plane.stops) == 1  # the actions ran once


def test_a_healthy_job_ends_with_no_issues_found(plane: Plane) -> None:
    service = DebuggerRulesService(plane.context)
    job = plane.submit(["VanishingGradient", "ExplodingTensor", "AllZero"])
    service.job_changed(job)
    plane.gradients(range(4), 0.1)
    service.tick()
    assert {r.status for r in plane.store.rule_evaluations("job-a")} == {"InProgress"}
    service.job_changed(plane.end())
    rows = plane.store.rule_evaluations("job-a")
    assert {r.name: r.status for r in rows} == dict.fromkeys(
        ["VanishingGradient", "ExplodingTensor", "AllZero"], "NoIssuesFound"
    )


def test_the_profiler_service_leaves_debugger_rules_alone(plane: Plane) -> None:
    service = RulesService(plane.context)
    service.job_changed(plane.submit(["VanishingGradient"]))
    service.tick()
    assert plane.store.rule_evaluations("job-a") == []


def test_a_finding_survives_a_control_plane_restart(plane: Plane) -> None:
    first = DebuggerRulesService(plane.context)
    job = plane.submit([{"rule": "VanishingGradient", "actions": ["stop_training"]}])
    first.job_changed(job)
    plane.gradients(range(2), 1e-12)
    first.tick()
    assert plane.row("VanishingGradient").status == "IssuesFound"
    first.close()
    second = DebuggerRulesService(plane.context)
    second.tick()  # adopts the running job
    assert "job-a" in second.jobs
    second.tick()
    second.job_changed(plane.end())
    row = plane.row("VanishingGradient")
    assert row.status == "IssuesFound" and "vanishes at step 0" in row.status_details
    assert len(plane.stops) == 1


def test_bad_parameters_are_an_error_row(plane: Plane) -> None:
    service = DebuggerRulesService(plane.context)
    job = plane.submit(
        [{"rule": "SimilarAcrossRuns", "rule_parameters": {"other_trials": "no-such-job"}}]
    )
    service.job_changed(job)
    service.tick()
    row = plane.row("SimilarAcrossRuns")
    assert row.status == "Error"
    assert row.status_details == "ValueError: other_trials: no training job named 'no-such-job'"


def test_stalled_training_stops_the_job_when_asked(plane: Plane) -> None:
    service = DebuggerRulesService(plane.context)
    rule = {
        "rule": "StalledTrainingRule",
        "rule_parameters": {"threshold": 60, "stop_training_on_fire": True},
    }
    service.job_changed(plane.submit([rule]))
    plane.gradients(range(2), 0.1)
    service.tick()
    plane.now += 30
    service.tick()
    assert plane.row("StalledTrainingRule").status == "InProgress"
    plane.now += 31
    service.tick()
    row = plane.row("StalledTrainingRule")
    assert row.status == "IssuesFound" and "no new step for 61 s" in row.status_details
    assert len(plane.stops) == 1 and "StalledTrainingRule" in plane.stops[0][1]


def _processing_job_arn_pattern() -> str:
    """The API model's pattern for a ProcessingJobArn (botocore's own copy of the model)."""
    model = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")
    return str(model["shapes"]["ProcessingJobArn"]["pattern"])


def test_describe_shows_debug_rule_statuses_beside_profiler_ones(plane: Plane) -> None:
    service = DebuggerRulesService(plane.context)
    job = plane.submit(["VanishingGradient", "StepOutlier"])
    service.job_changed(job)
    plane.gradients(range(2), 1e-12)
    service.tick()
    job = plane.store.get_job("job-a")
    assert job is not None
    iso = lambda ts: None if ts is None else time.strftime("%Y", time.gmtime(ts))  # noqa: E731
    debug = debugger_sections(plane.store, job, iso, "eu-west-1")["DebugRuleEvaluationStatuses"]
    assert [s["RuleConfigurationName"] for s in debug] == ["VanishingGradient"]
    status = debug[0]
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    arn = status["RuleEvaluationJobArn"]  # as every ARN of the server: region, account, lower case
    assert arn == "arn:aws:sagemaker:eu-west-1:000000000000:processing-job/job-a-vanishinggradient"
    assert re.fullmatch(_processing_job_arn_pattern(), arn)
    assert set(status) >= {"StatusDetails", "LastModifiedTime", "Evaluation"}
    assert status["Evaluation"]["Recommendation"]
    profiler = profiler_sections(plane.store, job, iso)["ProfilerRuleEvaluationStatuses"]
    assert [s["RuleConfigurationName"] for s in profiler] == ["StepOutlier"]


def test_the_verdict_follows_a_step_within_a_tick(plane: Plane) -> None:
    """The lag from a step on storage to its verdict is one tick of the service (1 s) plus
    the read: measured here on real files, with the real clock."""
    service = DebuggerRulesService(plane.context)
    service.job_changed(plane.submit(["ExplodingTensor"]))
    series = Series().add(0, **{"fc.weight": np.array([np.nan], np.float32)})
    write_series(plane.tensors, series, end=False)
    started = time.perf_counter()
    service.tick()
    elapsed = time.perf_counter() - started
    assert plane.row("ExplodingTensor").status == "IssuesFound"
    print(f"one tick read and judged the step in {elapsed * 1000:.1f} ms")


def test_a_hostile_step_is_an_error_line_and_the_rule_goes_on(
    plane: Plane, caplog: pytest.LogCaptureFixture
) -> None:
    """Labels that are not class ids (NaN) make the rule's row Error with one line, and the
    server's log one line (no traceback); the next step is evaluated at the next tick."""
    service = DebuggerRulesService(plane.context)
    service.job_changed(plane.submit(["Confusion"]))
    bad = Series().add(0, labels=np.array([np.nan, 1.0]), predictions=np.array([0.0, 1.0]))
    write_series(plane.tensors, bad, end=False)
    with caplog.at_level(logging.WARNING, logger="trainops"):
        service.tick()
    logged = [r for r in caplog.records if "Confusion" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in logged] == [(logging.WARNING, None)]
    assert logged[0].getMessage().endswith("ValueError: labels are not finite class ids")
    row = plane.row("Confusion")
    assert (row.status, row.status_details) == (
        "Error",
        "ValueError: labels are not finite class ids",
    )
    confused = Series().add(1, labels=np.arange(10), predictions=np.zeros(10, dtype=np.int64))
    write_series(plane.tensors, confused, end=False)
    plane.now += 1
    service.tick()
    assert plane.row("Confusion").status == "IssuesFound"


def test_a_jobs_debugger_rules_share_one_trial(plane: Plane) -> None:
    """A trial holds every record it read: the rules of a job read through one, not one each
    (a job's files would otherwise cost the control plane their memory once per rule)."""
    from trainops.rules._tracking import JobRules

    job = plane.submit(["VanishingGradient", "ExplodingTensor", "AllZero"])
    plane.gradients(range(3), 0.1)
    rules = JobRules(job, plane.context, kind="debugger").rules
    trials = {id(state.rule.runner.rule.base_trial) for state in rules}  # type: ignore[union-attr]
    assert len(trials) == 1
    service = DebuggerRulesService(plane.context)
    service.job_changed(job)
    service.job_changed(plane.end())
    assert {r.status for r in plane.store.rule_evaluations("job-a")} == {"NoIssuesFound"}
    assert {r.status_details for r in plane.store.rule_evaluations("job-a")} == {
        "no issue in 3 steps evaluated (up to step 2)"
    }


def test_describe_lists_a_custom_rules_status_beside_the_built_in_ones(plane: Plane) -> None:
    """A custom rule in its ``name``/``source``/``rule_to_invoke`` form (kind ``custom``) has
    its row in ``DebugRuleEvaluationStatuses`` as SageMaker lists a custom rule's."""
    custom = {"name": "Mine", "source": "rules/mine.py", "rule_to_invoke": "Mine"}
    job = plane.submit(["VanishingGradient", custom], code_uri="file:///no/such/code.tar.gz")
    DebuggerRulesService(plane.context).job_changed(job)
    assert plane.row("Mine").kind == "custom"
    found = plane.store.get_job("job-a")
    assert found is not None
    iso = lambda ts: None if ts is None else str(ts)  # noqa: E731
    debug = debugger_sections(plane.store, found, iso, "us-east-1")["DebugRuleEvaluationStatuses"]
    assert [s["RuleConfigurationName"] for s in debug] == ["VanishingGradient", "Mine"]
    assert debug[1]["RuleEvaluationStatus"] == plane.row("Mine").status


def test_the_rules_trial_holds_only_the_steps_the_rules_still_need(plane: Plane) -> None:
    """A job's tensors must cost the control plane a bounded, small memory: the rules' shared
    trial forgets the steps every rule is done with (WeightUpdateRatio keeps the step before,
    UnchangedTensor its tensors' last num_steps - 1 saved steps), under a cap of its own."""
    from trainops.rules._debugger import SERVICE_MAX_RECORDS
    from trainops.rules._tracking import JobRules

    job = plane.submit(["VanishingGradient", "WeightUpdateRatio", "UnchangedTensor"])
    job_rules = JobRules(job, plane.context, kind="debugger")
    trial = job_rules.rules[0].rule.runner.rule.base_trial  # type: ignore[union-attr]
    assert trial.limits.max_records == SERVICE_MAX_RECORDS < 100_000
    held = []
    for start in range(0, 400, 40):
        series = Series()
        for step in range(start, start + 40):
            scale = 1.0 + step / 100
            series.add(step, **{"gradient/fc.weight": np.full((4, 4), scale, np.float32)})
            series.add(step, **{"fc.weight": np.full((4, 4), scale, np.float32)})
        write_series(plane.tensors, series, end=False)
        plane.now += 1
        job_rules.scan(job)
        held.append(trial.records_held)
    assert trial.steps(show_incomplete_steps=True)[-1] == 399
    assert max(held) <= 3 * 40  # 2 tensors and the step, of at most the last tick's 40 steps
    assert trial.steps()[0] >= 360 and not trial.errors
    job_rules.scan(plane.end(), final=True)
    rows = {r.name: r for r in plane.store.rule_evaluations("job-a")}
    assert {r.status for r in rows.values()} == {"NoIssuesFound"}, rows
    assert "400 steps evaluated" in rows["WeightUpdateRatio"].status_details


def test_past_half_its_cap_a_trial_forgets_the_rules_look_back_first(plane: Plane) -> None:
    """A tensor saved once keeps UnchangedTensor's look back at its step: past half the cap
    the trial forgets it anyway rather than leave every later step out."""
    from trainops.rules._base import ProfilerData
    from trainops.rules._debugger import DebuggerRuleEvaluation, SharedTrials

    job = plane.submit([{"rule": "UnchangedTensor", "rule_parameters": {"num_steps": "3"}}])
    trials = SharedTrials(max_records=40)
    evaluation = DebuggerRuleEvaluation(job.spec.rules[0], job, plane.context, trials)
    once = Series().add(0, **{"fc.bias": np.zeros(2, np.float32)})
    write_series(plane.tensors, once, end=False)
    for start in range(0, 60, 5):
        series = Series()
        for step in range(max(start, 1), start + 5):
            series.add(step, **{"fc.weight": np.full(2, step, np.float32)})
        write_series(plane.tensors, series, end=False)
        evaluation.evaluate(ProfilerData(now=plane.now))
    trial = evaluation.runner.rule.base_trial
    assert trial.records_held <= 40 and not trial.errors
    assert evaluation.runner.next_step == 60  # every step evaluated
