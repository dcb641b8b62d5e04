"""A tuning job's cost and analysis from a real control plane: each trial's cost is its
training jobs' (as DescribeTrainingJob prices them) and the tuning job's is their sum; a trial
stopped by the tuner's rule counts as early stopped (one stopped because the tuning job ended
does not), with the steps it did not run; ``trainops tuning report`` writes the PNGs, the page
and the data, reading the home's store once the server is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.control._harness import control_plane, wait_for
from tests.tuner.test_service import create, describe, tuning_config, wait_tuning
from trainops._settings import Settings
from trainops.cli import main
from trainops.tuner import EARLY_STOP_PREFIX
from trainops.tuner._service import _EARLY_STOP


def test_each_trial_costs_what_its_job_costs_and_the_total_is_their_sum(
    settings: Settings,
) -> None:
    with control_plane(settings) as plane:
        create(plane, tuning_config(jobs=3, parallel=2))
        done = wait_tuning(plane, "tiny", "Completed")
        jobs = {
            t["TrainingJobName"]: plane.client.get(f"/api/v1/jobs/{t['TrainingJobName']}").json()
            for t in done["TrainingJobs"]
        }
        analysis = plane.client.get("/api/v1/tuning-jobs/tiny/analysis")
        missing = plane.client.get("/api/v1/tuning-jobs/nope/analysis")
    assert missing.status_code == 404
    for trial in done["TrainingJobs"]:
        job = jobs[trial["TrainingJobName"]]
        assert trial["BillableTimeInSeconds"] == job["BillableTimeInSeconds"] >= 1
        assert trial["EstimatedCostUsd"] == job["Cost"]["EstimatedCostUsd"] > 0
    cost = done["Cost"]
    assert cost["Currency"] == "USD" and cost["EstimatedCostUsd"] == pytest.approx(
        sum(t["EstimatedCostUsd"] for t in done["TrainingJobs"]), abs=1e-6
    )
    assert done["BestTrainingJob"]["EstimatedCostUsd"] > 0
    data = analysis.json()
    assert analysis.status_code == 200 and data["name"] == "tiny"
    assert [t["number"] for t in data["trials"]] == [0, 1, 2]
    assert data["total_cost_usd"] == pytest.approx(cost["EstimatedCostUsd"], abs=1e-5)
    assert [s["parameter"] for s in data["slices"]] == ["lr", "optimizer"]
    assert data["early_stopping"]["stopped_trials"] == 0


def _three_values_each(plane: Any) -> bool:
    trials = plane.server.controller.store.trials("tiny")
    return len(trials) == 2 and all(len(t.intermediate) == 3 for t in trials)


def test_a_trial_stopped_by_the_rule_saves_the_steps_it_did_not_run(
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _EARLY_STOP.startswith(EARLY_STOP_PREFIX)  # the tuner's message, as it is told
    config = tuning_config(jobs=2, parallel=2, FAKE_HANG_ATTEMPTS="1", FAKE_LINE_DELAY="0.2")
    config["training_job"]["hyperparameters"]["epochs"] = 9
    with control_plane(settings) as plane:
        create(plane, config)
        wait_for(lambda: _three_values_each(plane), 60, "both trials at their third value")
        first = plane.server.controller.store.trials("tiny")[0].training_job
        # The tuner's own way of stopping a trial by its rule (ServiceContext.stop_job).
        assert plane.server.controller._stop_for_service(
            first, _EARLY_STOP.format(rule="median rule")
        )
        wait_for(lambda: describe(plane, "tiny")["TrainingJobStatusCounters"]["Stopped"] == 1,
                 60, "the first trial stopped")  # fmt: skip
        assert plane.client.post("/api/v1/tuning-jobs/tiny/stop").status_code == 202
        wait_tuning(plane, "tiny", "Stopped")
        data = plane.client.get("/api/v1/tuning-jobs/tiny/analysis").json()
    early = [t["early_stopped"] for t in data["trials"]]
    assert early == [True, False]
    saved = data["early_stopping"]
    assert (saved["budget_steps"], saved["budget_source"]) == (
        9,
        "the static hyperparameter epochs",
    )
    assert saved["stopped_trials"] == 1 and saved["saved_steps"] == 6
    assert saved["saved_seconds"] > 0 and saved["saved_cost_usd"] > 0
    # With no server running, the report reads the home's store.
    require_extra("dev", "matplotlib")
    monkeypatch.setenv("TRAINOPS_HOME", str(settings.home))
    monkeypatch.delenv("TRAINOPS_SERVER_URL", raising=False)
    out = tmp_path / "report"
    assert main(["tuning", "report", "tiny", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "analysis.json", "importance.png", "index.html", "objective.png", "slices.png",
    ]  # fmt: skip
    assert "tiny-001-" in (out / "index.html").read_text()
    capsys.readouterr()
    assert main(["tuning", "report", "nope", "--out", str(out)]) == 2
    (tmp_path / "file").write_text("x")
    assert main(["tuning", "report", "tiny", "--out", str(tmp_path / "file")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        "trainops: error: no tuning job named 'nope'",
        f"trainops: error: {tmp_path / 'file'}: not a folder (--out names the folder to write)",
    ]
