"""The tuner's passes, step by step on a real store. It dies between any two of its writes:
whatever the rows say when it comes back, it submits each trial's job exactly once and makes no
trial twice. Early stopping reads the trials' metrics as the agents' reports stored them.
Submissions go straight into the store, as the controller records them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tuner.test_service import tuning_config
from trainops._settings import Settings
from trainops.control.services import ServiceContext
from trainops.protocol import AgentEvent, EventKind
from trainops.spec import JobSpec
from trainops.store import JobRecord, MetadataStore, NewHost, TuningTrialRecord
from trainops.tuner import (
    TunerService,
    describe_tuning_job,
    search_for,
    stored_config,
    trial_job_name,
)


class Plane:
    """A store, the submissions the tuner made and the stops it asked for."""

    def __init__(self, path: Path) -> None:
        self.store = MetadataStore(path)
        self.submitted: list[str] = []
        self.stops: list[str] = []
        self.now = 1000.0
        context = ServiceContext(
            self.store, Settings.load(), self._stop, lambda: self.now, submit_job=self._submit
        )
        self.tuner = TunerService(context)

    def _submit(self, name: str, spec: JobSpec, code_uri: str) -> JobRecord:
        self.submitted.append(name)
        return self.store.create_job(
            name=name,
            spec=spec.view(),
            code_uri=code_uri,
            output_prefix=f"file:///out/{name}",
            max_attempts=1,
            status="InProgress",
            secondary_status="Starting",
            message="starting",
            now=self.now,
        )

    def _stop(self, name: str, message: str) -> bool:
        self.stops.append(name)
        return True

    def report(self, name: str, *losses: float, attempt: int = 1) -> None:
        """Store ``losses`` as the job's host algo-1 (of ``attempt``) reports its metric
        ``loss``."""
        if not self.store.hosts(name, attempt):
            self.store.create_hosts(name, attempt, [NewHost("algo-1", "/r", "/s")])
        done = len(self.store.metrics(name, "loss", attempt=attempt))
        events = [
            AgentEvent(done + i + 1, self.now, EventKind.METRIC, {"name": "loss", "value": v,
                                                                  "timestamp": self.now})
            for i, v in enumerate(losses)
        ]  # fmt: skip
        assert self.store.ingest(name, "algo-1", attempt, events) is not None

    def end(self, name: str, status: str = "Completed", reason: str | None = None) -> None:
        self.store.set_secondary(
            name, status, "done", self.now, final=True, status=status, failure_reason=reason
        )


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    made = Plane(tmp_path / "trainops.db")
    made.store.create_tuning_job("tiny", tuning_config(jobs=3, parallel=2), "file:///c", 1.0)
    yield made
    made.store.close()


def _pending(plane: Plane, number: int) -> TuningTrialRecord:
    tuning = plane.store.get_tuning_job("tiny")
    assert tuning is not None
    trial = TuningTrialRecord(
        "tiny",
        number,
        trial_job_name(tuning, number),
        {"lr": 0.01, "optimizer": "sgd"},
        "Pending",
        plane.now,
    )
    plane.store.add_trial(trial)
    return trial


def test_died_after_recording_a_trial_before_submitting_it(plane: Plane) -> None:
    trial = _pending(plane, 0)
    plane.tuner.advance("tiny")  # the tuner that comes back
    trials = plane.store.trials("tiny")
    assert plane.submitted[0] == trial.training_job  # the recorded name, not a new trial
    assert [t.number for t in trials] == [0, 1]  # and one more, up to the parallel limit
    assert len(plane.submitted) == len(set(plane.submitted)) == 2


def test_died_after_submitting_before_marking_the_trial_running(plane: Plane) -> None:
    trial = _pending(plane, 0)
    plane._submit(trial.training_job, JobSpec(entry_point="train.py"), "file:///c")
    plane.submitted.clear()
    plane.tuner.advance("tiny")
    first = plane.store.trials("tiny")[0]
    assert first.status == "InProgress"
    assert trial.training_job not in plane.submitted  # never submitted twice


def test_repeated_passes_make_no_trial_twice_and_end_at_the_maximum(plane: Plane) -> None:
    for _ in range(3):
        plane.tuner.advance("tiny")
    assert len(plane.submitted) == 2  # the parallel limit, however often it runs
    for name in list(plane.submitted):
        plane.end(name)
    plane.tuner.advance("tiny")
    plane.tuner.advance("tiny")
    assert len(plane.submitted) == 3
    plane.end(plane.submitted[-1])
    plane.tuner.advance("tiny")
    tuning = plane.store.get_tuning_job("tiny")
    assert tuning is not None and tuning.status == "Completed"
    assert [t.status for t in plane.store.trials("tiny")] == ["Completed"] * 3


def test_a_trial_that_cannot_be_submitted_fails_alone(plane: Plane) -> None:
    config = tuning_config(name="bad", jobs=1, parallel=1)
    plane.store.create_tuning_job("bad", config, "file:///c", 1.0)

    def refuse(name: str, spec: JobSpec, code_uri: str) -> JobRecord:
        from trainops._errors import SpecError

        raise SpecError([("code_uri", "no object at file:///c: upload the code first")])

    tuner = TunerService(
        ServiceContext(plane.store, Settings.load(), lambda n, m: True, lambda: 5.0, None, refuse)
    )
    tuner.advance("bad")
    tuner.advance("bad")
    (trial,) = plane.store.trials("bad")
    assert trial.status == "Failed" and "upload the code first" in (trial.failure_reason or "")
    tuning = plane.store.get_tuning_job("bad")
    # Its only trial failed: as SageMaker's, the tuning job fails (none of its trials succeeded).
    assert tuning is not None and tuning.status == "Failed"
    assert tuning.failure_reason == (
        "No training job succeeded after 1 attempt. "
        "Please take a look at the training job failures to get more details."
    )
    assert tuning.completion_reason is None


def _failing_job(plane: Plane, jobs: int = 8, parallel: int = 3) -> None:
    plane.store.create_tuning_job(
        "flaky", tuning_config(name="flaky", jobs=jobs, parallel=parallel), "file:///c", 1.0
    )


def _end_running(plane: Plane, status: str = "Failed", reason: str = "AlgorithmError: x") -> None:
    """End every trial job of ``flaky`` still running as ``status``, and run a pass."""
    for trial in plane.store.trials("flaky"):
        job = plane.store.get_job(trial.training_job)
        if job is not None and job.status == "InProgress":
            plane.end(trial.training_job, status, reason if status == "Failed" else None)
    plane.tuner.advance("flaky")


def test_failed_trials_do_not_end_a_tuning_job_once_one_succeeded(plane: Plane) -> None:
    _failing_job(plane, jobs=6, parallel=1)
    plane.tuner.advance("flaky")
    plane.report(plane.submitted[-1], 0.5)
    _end_running(plane, "Completed")
    for _ in range(5):  # the five others fail: a tuning job with a success runs them all
        _end_running(plane)
    tuning = plane.store.get_tuning_job("flaky")
    assert tuning is not None and tuning.status == "Completed", tuning
    assert tuning.failure_reason is None
    assert [t.status for t in plane.store.trials("flaky")] == ["Completed"] + ["Failed"] * 5


def test_five_failed_trials_and_no_success_fail_the_tuning_job_and_stop_the_rest(
    plane: Plane,
) -> None:
    _failing_job(plane, jobs=8, parallel=3)
    plane.tuner.advance("flaky")
    _end_running(plane)  # trials 0-2 fail; 3-5 start
    first, second = plane.submitted[3:5]
    plane.end(first, "Failed", "AlgorithmError: x")
    plane.end(second, "Failed", "InternalServerError: host lost")  # retried: not failed yet
    plane.tuner.advance("flaky")
    tuning = plane.store.get_tuning_job("flaky")
    assert tuning is not None and tuning.status == "InProgress" and not tuning.failure_reason
    plane.end(plane.submitted[-1], "Failed", "AlgorithmError: x")  # the fifth, none succeeded
    plane.tuner = TunerService(plane.tuner.context)  # a tuner that died and came back
    plane.tuner.advance("flaky")
    tuning = plane.store.get_tuning_job("flaky")
    reason = (
        "No training job succeeded after 5 attempts. "
        "Please take a look at the training job failures to get more details."
    )
    assert tuning is not None and tuning.status == "InProgress"
    assert tuning.failure_reason == reason
    jobs = [plane.store.get_job(n) for n in plane.submitted]
    running = [j.name for j in jobs if j is not None and j.status == "InProgress"]
    assert running and set(running) <= set(plane.stops)  # the running trials are stopped
    submitted = len(plane.submitted)
    _end_running(plane, "Stopped")  # a stopped trial does not undo the decision
    tuning = plane.store.get_tuning_job("flaky")
    assert tuning is not None and tuning.status == "Failed" and tuning.failure_reason == reason
    assert len(plane.submitted) == submitted  # nothing more was started, nothing retried
    described = describe_tuning_job(plane.store, tuning, stored_config(tuning))
    assert described["FailureReason"] == reason
    assert described["TrainingJobStatusCounters"]["NonRetryableError"] == 5
    assert described["TrainingJobStatusCounters"]["InProgress"] == 0


def test_the_median_rule_stops_a_trailing_trial_which_keeps_its_objective(plane: Plane) -> None:
    config = tuning_config(name="early", jobs=5, parallel=5)
    config["training_job_early_stopping_type"] = "Auto"
    plane.store.create_tuning_job("early", config, "file:///c", 1.0)
    plane.tuner.advance("early")
    names = [t.training_job for t in plane.store.trials("early")]
    assert len(names) == 5
    for name in names[:3]:
        plane.report(name, 1.0, 0.5, 0.3)
        plane.end(name)
    plane.report(names[3], 5.0)  # far worse than the others' running averages at epoch 1
    plane.report(names[4], 0.9)
    plane.tuner.advance("early")
    assert plane.stops == [names[3]]
    plane.end(names[3], "Stopped")
    plane.tuner.advance("early")
    stopped = plane.store.trials("early")[3]
    assert (stopped.status, stopped.objective, stopped.intermediate) == ("Stopped", 5.0, [5.0])
    plane.report(names[4], 0.4, 0.2)
    plane.end(names[4])
    plane.tuner.advance("early")
    tuning = plane.store.get_tuning_job("early")
    assert tuning is not None and tuning.status == "Completed"
    described = describe_tuning_job(plane.store, tuning, stored_config(tuning))
    assert described["TrainingJobStatusCounters"]["Stopped"] == 1
    assert described["ObjectiveStatusCounters"]["Succeeded"] == 5  # a Stopped trial counts
    assert described["BestTrainingJob"]["TrainingJobName"] == names[4]


def test_a_running_trial_s_new_values_are_judged_when_stored_not_at_the_tick(
    plane: Plane,
) -> None:
    """The control plane tells the tuner which jobs stored metric points: with a rule, the trial
    is judged then (no advance, i.e. no tick, in between); without one, nothing is read early."""
    config = tuning_config(name="early", jobs=5, parallel=5)
    config["training_job_early_stopping_type"] = "Auto"
    plane.store.create_tuning_job("early", config, "file:///c", 1.0)
    plane.tuner.advance("early")
    names = [t.training_job for t in plane.store.trials("early")]
    for name in names[:3]:
        plane.report(name, 1.0, 0.5, 0.3)
        plane.end(name)
    plane.tuner.metrics_stored(names[:3])  # ended: these come with job_changed, not here
    plane.report(names[3], 5.0)
    plane.tuner.metrics_stored([names[3], "not-a-trial"])
    assert plane.stops == [names[3]]
    assert plane.store.trials("early")[3].intermediate == [5.0]
    plane.tuner.advance("tiny")  # the plain tuning job: two trials, no rule
    plain = plane.store.trials("tiny")[0]
    plane.report(plain.training_job, 9.0)
    plane.tuner.metrics_stored([plain.training_job])
    assert plane.store.trials("tiny")[0].intermediate == []  # its values wait for the tick
    assert plane.stops == [names[3]]


def test_a_job_someone_else_made_under_a_trial_s_name_is_not_adopted(plane: Plane) -> None:
    tuning = plane.store.get_tuning_job("tiny")
    assert tuning is not None
    squatter = trial_job_name(tuning, 0)
    plane.now = 500.0  # before the tuning job's trial is recorded
    plane.store.create_job(
        name=squatter, spec=JobSpec(entry_point="x.py").view(), code_uri="file:///other",
        output_prefix="file:///o", max_attempts=1, status="InProgress",
        secondary_status="Starting", message="m", now=plane.now,
    )  # fmt: skip
    plane.now = 1000.0
    plane.tuner.advance("tiny")
    first = plane.store.trials("tiny")[0]
    assert first.status == "Failed"
    assert f"a training job named {squatter} exists" in (first.failure_reason or "")


def test_a_trial_the_search_cannot_replay_fails_the_tuning_job_and_stops_its_trials(
    plane: Plane,
) -> None:
    plane.tuner.advance("tiny")
    running = plane.store.trials("tiny")[0].training_job
    tuning = plane.store.get_tuning_job("tiny")
    assert tuning is not None
    outside = TuningTrialRecord(
        "tiny", 2, trial_job_name(tuning, 2), {"lr": 5.0, "optimizer": "sgd"}, "Pending", plane.now
    )  # e.g. written by an older trainops whose ranges differed
    plane.store.add_trial(outside)
    plane.tuner.advance("tiny")
    failed = plane.store.get_tuning_job("tiny")
    assert failed is not None and failed.status == "Failed"
    assert (
        failed.failure_reason == "its trials cannot be replayed: trial 2: lr outside their ranges"
    )
    assert running in plane.stops


def test_only_an_ended_trial_s_job_moves_the_tuning_job_between_ticks(plane: Plane) -> None:
    plane.tuner.advance("tiny")
    first, second = plane.submitted
    plane.end(second)
    running = plane.store.get_job(first)
    assert running is not None
    plane.tuner.job_changed(running)  # a running trial's change waits for the next tick
    assert len(plane.submitted) == 2
    ended = plane.store.get_job(second)
    assert ended is not None
    plane.tuner.job_changed(ended)  # an end frees its slot at once
    assert len(plane.submitted) == 3


def test_a_job_retried_by_its_retry_strategy_counts_its_last_attempt_only(plane: Plane) -> None:
    config = tuning_config(name="retried", jobs=4, parallel=4)
    config["training_job_early_stopping_type"] = "Auto"
    plane.store.create_tuning_job("retried", config, "file:///c", 1.0)
    plane.tuner.advance("retried")
    names = [t.training_job for t in plane.store.trials("retried")]
    for name in names[:3]:
        plane.report(name, 1.0, 0.5, 0.3)
        plane.end(name)
    retried = names[3]
    plane.report(retried, 0.9, 0.45)  # attempt 1: on par with the others, then lost
    plane.tuner.advance("retried")
    assert plane.store.trials("retried")[3].intermediate == [0.9, 0.45]
    plane.store.update_job(retried, plane.now, attempt=2)  # the job's retry starts again
    plane.tuner.advance("retried")
    trial = plane.store.trials("retried")[3]
    assert (trial.intermediate, trial.objective) == ([], None)  # not attempt 1's curve
    plane.report(retried, 0.95, attempt=2)
    plane.tuner.advance("retried")
    assert plane.store.trials("retried")[3].intermediate == [0.95]
    plane.report(retried, 0.4, 0.2, attempt=2)
    plane.tuner.advance("retried")
    assert plane.stops == []  # attempt 2's own curve is judged, and it is no laggard
    plane.end(retried)
    plane.tuner.advance("retried")
    trial = plane.store.trials("retried")[3]
    assert (trial.status, trial.intermediate, trial.objective) == (
        "Completed",
        [0.95, 0.4, 0.2],
        0.2,
    )
    tuning = plane.store.get_tuning_job("retried")
    assert tuning is not None and tuning.status == "Completed"


def test_a_retried_attempt_is_stopped_early_on_its_own_curve(plane: Plane) -> None:
    config = tuning_config(name="laggard", jobs=4, parallel=4)
    config["training_job_early_stopping_type"] = "Auto"
    plane.store.create_tuning_job("laggard", config, "file:///c", 1.0)
    plane.tuner.advance("laggard")
    names = [t.training_job for t in plane.store.trials("laggard")]
    for name in names[:3]:
        plane.report(name, 1.0, 0.5, 0.3)
        plane.end(name)
    retried = names[3]
    plane.report(retried, 0.9, 0.45, 0.25)  # attempt 1 led the field
    plane.tuner.advance("laggard")
    plane.store.update_job(retried, plane.now, attempt=2)
    plane.report(retried, 5.0, attempt=2)  # attempt 2 trails far behind at epoch 1
    plane.tuner.advance("laggard")
    assert plane.stops == [retried]
    plane.end(retried, "Stopped")
    plane.tuner.advance("laggard")
    trial = plane.store.trials("laggard")[3]
    assert (trial.status, trial.intermediate, trial.objective) == ("Stopped", [5.0], 5.0)


def test_describe_gives_the_completion_details_a_search_rebuilt_from_the_rows_gives(
    plane: Plane,
) -> None:
    config = tuning_config(name="flat", jobs=6, parallel=6)
    plane.store.create_tuning_job("flat", config, "file:///c", 1.0)
    plane.tuner.advance("flat")
    names = [t.training_job for t in plane.store.trials("flat")]
    for name, loss in zip(names, [0.5, 0.9, 0.8, 0.7, 0.6], strict=False):
        plane.report(name, loss)  # the first is the best; four trials after it do no better
        plane.end(name)
    plane.tuner.advance("flat")
    tuning = plane.store.get_tuning_job("flat")
    assert tuning is not None
    described = describe_tuning_job(plane.store, tuning, stored_config(tuning))
    details = described["TuningJobCompletionDetails"]
    assert details["NumberOfTrainingJobsObjectiveNotImproving"] == 4
    rebuilt = search_for(plane.store, tuning, stored_config(tuning), plane.store.trials("flat"))
    expected = rebuilt.completion_details()
    assert details == {
        "NumberOfTrainingJobsObjectiveNotImproving": (
            expected.number_of_training_jobs_objective_not_improving
        ),
        "ConvergenceDetected": expected.convergence_detected,
    }


def test_a_tuning_job_s_config_is_validated_once_not_on_every_pass(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainops.tuner import _service

    read: list[str] = []
    real = _service.stored_config

    def counting(tuning: Any) -> Any:
        read.append(tuning.name)
        return real(tuning)  # the real validation, counted

    monkeypatch.setattr(_service, "stored_config", counting)
    for _ in range(3):
        plane.tuner.advance("tiny")
        plane.tuner.tick()
    assert read == ["tiny"]
    for _ in range(3):  # three trials, two at a time
        for name in list(plane.submitted):
            plane.end(name)
        plane.tuner.advance("tiny")
    tuning = plane.store.get_tuning_job("tiny")
    assert tuning is not None and tuning.status == "Completed"
    assert plane.tuner._configs == {}  # an ended job's config is let go


def test_convergence_ends_the_job_and_is_described_with_its_time(plane: Plane) -> None:
    config = tuning_config(name="flat", jobs=12, parallel=12)
    config["completion_criteria"] = {"convergence_detected": {"complete_on_convergence": "Enabled"}}
    plane.store.create_tuning_job("flat", config, "file:///c", 1.0)
    plane.tuner.advance("flat")
    names = [t.training_job for t in plane.store.trials("flat")]
    assert len(names) == 12
    for index, name in enumerate(names[:10]):  # ten equal objectives: nothing improves
        plane.now = 2000.0 + index
        plane.report(name, 1.0)
        plane.end(name)
    plane.tuner.advance("flat")
    assert set(names[10:]) <= set(plane.stops)  # the job ends: its running trials stop
    for name in names[10:]:
        plane.end(name, "Stopped")
    plane.tuner.advance("flat")
    tuning = plane.store.get_tuning_job("flat")
    assert tuning is not None and tuning.status == "Completed"
    assert tuning.completion_reason == "ConvergenceDetected"
    details = describe_tuning_job(plane.store, tuning, stored_config(tuning))[
        "TuningJobCompletionDetails"
    ]
    # SageMaker's ConvergenceDetectedTime: when the tenth trial, which made it converge, ended.
    assert details["ConvergenceDetected"] is True
    assert details["ConvergenceDetectedTime"] == "1970-01-01T00:33:29.000+00:00"


def test_max_runtime_stops_the_trials_and_ends_the_job_stopped(plane: Plane) -> None:
    config = tuning_config(name="timed", jobs=6, parallel=2)
    config["resource_limits"]["max_runtime_in_seconds"] = 120
    plane.store.create_tuning_job("timed", config, "file:///c", plane.now)
    plane.tuner.advance("timed")
    running = list(plane.submitted)
    plane.now += 60
    plane.tuner.advance("timed")
    assert plane.stops == []  # within its time
    tuning = plane.store.get_tuning_job("timed")
    assert tuning is not None
    described = describe_tuning_job(plane.store, tuning, stored_config(tuning), plane.now)
    assert described["ConsumedResources"] == {"RuntimeInSeconds": 60}
    plane.now += 61
    plane.tuner.advance("timed")
    assert sorted(plane.stops) == sorted(running)  # past it: the trials are stopped
    for name in running:
        plane.end(name, "Stopped")
    plane.tuner.advance("timed")
    tuning = plane.store.get_tuning_job("timed")
    assert tuning is not None and tuning.status == "Stopped"
    assert tuning.completion_reason == "MaxRuntimeInSecondsReached"
    assert plane.submitted == running  # nothing started after the limit
    described = describe_tuning_job(plane.store, tuning, stored_config(tuning), plane.now + 999)
    assert described["ConsumedResources"] == {"RuntimeInSeconds": 121}  # to its end


def test_a_job_whose_trials_all_failed_or_stopped_without_an_objective_fails(
    plane: Plane,
) -> None:
    _failing_job(plane, jobs=3, parallel=3)
    plane.tuner.advance("flaky")
    stopped, *failed = plane.submitted
    plane.end(stopped, "Stopped")  # stopped before it reported an objective: no success
    plane.tuner.advance("flaky")
    tuning = plane.store.get_tuning_job("flaky")
    assert tuning is not None and tuning.status == "InProgress" and not tuning.failure_reason
    for name in failed:
        plane.end(name, "Failed", "AlgorithmError: x")
    plane.tuner.advance("flaky")
    tuning = plane.store.get_tuning_job("flaky")
    assert tuning is not None and tuning.status == "Failed"
    assert (tuning.failure_reason or "").startswith("No training job succeeded after 2 attempts.")
