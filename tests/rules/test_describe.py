"""describe's profiler keys, computed from a real store: before and after the rules service wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainops._settings import Settings
from trainops.server import describe
from trainops.spec import JobSpec
from trainops.store import MetadataStore, RuleEvaluation


def test_rule_statuses_before_and_after_evaluation(tmp_path: Path) -> None:
    store = MetadataStore(tmp_path / "trainops.db")
    try:
        rules: list[Any] = [
            {"rule": "StepOutlier", "rule_parameters": {"mode": "eval"}},
            "ProfilerReport",
        ]
        job = store.create_job(
            name="job-a",
            spec=JobSpec(entry_point="train.py", rules=rules).view(),
            code_uri="file:///code.tar.gz",
            output_prefix="file:///out/job-a",
            max_attempts=1,
            status="InProgress",
            secondary_status="Starting",
            message="starting",
            now=100.0,
        )
        found = describe(store, job, Settings.load(), 100.0)
        assert found["ProfilingStatus"] == "Enabled"
        configured = found["ProfilerRuleConfigurations"][0]
        assert configured["RuleParameters"]["mode"] == "EVAL"
        assert configured["RuleParameters"]["n_outliers"] == "10"
        assert [s["RuleEvaluationStatus"] for s in found["ProfilerRuleEvaluationStatuses"]] == [
            "InProgress",
            "InProgress",
        ]
        assert found["ProfilerRuleEvaluationStatuses"][0]["StatusDetails"] == "not evaluated yet"

        result = {
            "result": {
                "status": "IssuesFound",
                "details": "d",
                "recommendation": "r",
                "evidence": {"n": 1},
            },
            "found": {
                "status": "IssuesFound",
                "details": "d",
                "recommendation": "r",
                "evidence": {},
            },
            "found_time": 160.0,
            "actions": [{"type": "webhook", "ok": True, "detail": "POST https://h/***: HTTP 200"}],
            "evaluations": 2,
            "output": "file:///out/job-a/rule-output/StepOutlier/result.json",
        }
        store.set_rule_evaluation(
            RuleEvaluation(
                "job-a", "StepOutlier", "StepOutlier", "profiler", "IssuesFound", "d", 160.0, result
            )
        )
        status = describe(store, job, Settings.load(), 170.0)["ProfilerRuleEvaluationStatuses"][0]
        assert status == {
            "RuleConfigurationName": "StepOutlier",
            "RuleEvaluationStatus": "IssuesFound",
            "StatusDetails": "d",
            "LastModifiedTime": "1970-01-01T00:02:40.000+00:00",
            "Evaluation": {
                "Rule": "StepOutlier",
                "Recommendation": "r",
                "Evidence": {"n": 1},
                "FoundTime": "1970-01-01T00:02:40.000+00:00",
                "Actions": [
                    {"Type": "webhook", "Ok": True, "Detail": "POST https://h/***: HTTP 200"}
                ],
                "Evaluations": 2,
                "Output": "file:///out/job-a/rule-output/StepOutlier/result.json",
            },
        }
    finally:
        store.close()
