"""What the CLI prints, checked on hand-written API data."""

# The expected output holds the real multiplication sign the CLI prints.
# ruff: noqa: RUF001

from __future__ import annotations

from typing import Any

from trainops.cli._render import (
    format_cost,
    format_job_summary,
    format_jobs_table,
    format_metrics_csv,
    format_metrics_table,
    format_table,
)

DESCRIPTION: dict[str, Any] = {
    "TrainingJobName": "digits-2024-06-01-10-00-00-000",
    "TrainingJobStatus": "Completed",
    "SecondaryStatus": "Completed",
    "FailureReason": None,
    "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1},
    "FinalMetricDataList": [
        {"MetricName": "test_accuracy", "Value": 0.9722, "Timestamp": "2024-06-01T10:00:40Z"},
        {"MetricName": "loss", "Value": 0.08, "Timestamp": "2024-06-01T10:00:40Z"},
    ],
    "Artifacts": [
        {"Name": "model", "Uri": "file:///h/jobs/d/output/model.tar.gz"},
        {"Name": "output", "Uri": "file:///h/jobs/d/output/output.tar.gz"},
        {"Name": "log", "Host": "algo-1", "Uri": "file:///h/jobs/d/logs/algo-1.log"},
    ],
    "TrainingTimeInSeconds": 38,
    "BillableTimeInSeconds": 38,
    "Cost": {
        "Currency": "USD",
        "OnDemandUsdPerHour": 0.115,
        "InstanceCount": 1,
        "EstimatedCostUsd": 0.0012138,
        "PricesAsOf": "2024-06-01",
        "Region": "us-east-1",
    },
}


def test_table_aligns_columns_without_trailing_blanks() -> None:
    assert format_table(["A", "BB"], [["xxx", "y"], ["z", ""]]) == "A    BB\nxxx  y\nz"


def test_jobs_table() -> None:
    jobs = [
        {
            "TrainingJobName": "hello-1",
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "CreationTime": "2024-06-01T10:00:00.5+00:00",
            "InstanceType": "ml.c5.xlarge",
            "InstanceCount": 2,
        },
        {
            "TrainingJobName": "a",
            "TrainingJobStatus": "Failed",
            "SecondaryStatus": "Failed",
            "CreationTime": "2024-06-01T09:00:00Z",
            "InstanceType": "ml.m5.large",
            "InstanceCount": 1,
        },
    ]
    assert format_jobs_table(jobs).split("\n") == [
        "NAME     STATUS      SECONDARY  CREATED              INSTANCES",
        "hello-1  InProgress  Training   2024-06-01 10:00:00  ml.c5.xlarge × 2",
        "a        Failed      Failed     2024-06-01 09:00:00  ml.m5.large × 1",
    ]
    assert format_jobs_table([]) == "No jobs found."


def test_cost_line() -> None:
    assert format_cost(DESCRIPTION) == (
        "≈ $0.0012 (ml.m5.large × 1 at $0.115/h, prices as of 2024-06-01)"
    )
    big = {
        **DESCRIPTION,
        "Cost": {**DESCRIPTION["Cost"], "EstimatedCostUsd": 1234.5, "InstanceCount": 4},
    }
    assert format_cost(big) == "≈ $1,234.50 (ml.m5.large × 4 at $0.115/h, prices as of 2024-06-01)"
    assert format_cost({**DESCRIPTION, "Cost": None}) is None


def test_summary_of_a_completed_job() -> None:
    assert format_job_summary(DESCRIPTION).split("\n") == [
        "Job digits-2024-06-01-10-00-00-000: Completed",
        "Final metrics:",
        "  test_accuracy  0.9722",
        "  loss           0.08",
        "Artifacts:",
        "  model         file:///h/jobs/d/output/model.tar.gz",
        "  output        file:///h/jobs/d/output/output.tar.gz",
        "  log (algo-1)  file:///h/jobs/d/logs/algo-1.log",
        "Time: training 38 s, billable 38 s",
        "Cost: ≈ $0.0012 (ml.m5.large × 1 at $0.115/h, prices as of 2024-06-01)",
    ]


def test_summary_of_a_failed_job_without_metrics() -> None:
    failed = {
        "TrainingJobName": "bad",
        "TrainingJobStatus": "Failed",
        "FailureReason": "AlgorithmError: ExecuteUserScriptError: ZeroDivisionError",
        "TrainingTimeInSeconds": None,
        "BillableTimeInSeconds": 3,
    }
    assert format_job_summary(failed).split("\n") == [
        "Job bad: Failed",
        "Failure reason: AlgorithmError: ExecuteUserScriptError: ZeroDivisionError",
        "Time: training -, billable 3 s",
    ]


def test_summary_of_a_spot_job_prints_the_sdks_lines() -> None:
    spot = {
        "TrainingJobName": "spot",
        "TrainingJobStatus": "Completed",
        "TrainingTimeInSeconds": 500,
        "BillableTimeInSeconds": 100,
        "EnableManagedSpotTraining": True,
        "ManagedSpotTrainingSavings": 80.0,
        "Interruptions": 3,
    }
    assert format_job_summary(spot).split("\n")[-4:] == [
        "Training seconds: 500",
        "Billable seconds: 100",
        "Managed Spot Training savings: 80.0%",
        "Interruptions: 3",
    ]


POINTS = [
    {"MetricName": "loss", "Value": 0.5, "Timestamp": "2024-06-01T10:00:01Z", "Host": "algo-1"},
    {"MetricName": "loss", "Value": 0.25, "Timestamp": "2024-06-01T10:00:02Z", "Host": "algo-2"},
]


def test_multi_line_failure_reason_is_indented() -> None:
    reason = 'ExecuteUserScriptError:\nExitCode 1\nErrorMessage "bad"'
    summary = format_job_summary(
        {"TrainingJobName": "b", "TrainingJobStatus": "Failed", "FailureReason": reason}
    )
    assert summary.split("\n")[:5] == [
        "Job b: Failed",
        "Failure reason:",
        "  ExecuteUserScriptError:",
        "  ExitCode 1",
        '  ErrorMessage "bad"',
    ]


def test_small_costs_keep_two_significant_digits() -> None:
    cost = {**DESCRIPTION["Cost"], "EstimatedCostUsd": 0.0000319}
    assert format_cost({**DESCRIPTION, "Cost": cost}) == (
        "≈ $0.000032 (ml.m5.large × 1 at $0.115/h, prices as of 2024-06-01)"
    )


def test_metrics_table() -> None:
    assert format_metrics_table(POINTS).split("\n") == [
        "TIMESTAMP            METRIC  VALUE  HOST",
        "2024-06-01 10:00:01  loss    0.5    algo-1",
        "2024-06-01 10:00:02  loss    0.25   algo-2",
    ]


def test_metrics_csv() -> None:
    assert format_metrics_csv(POINTS) == (
        "timestamp,metric_name,value,host\n"
        "2024-06-01T10:00:01Z,loss,0.5,algo-1\n"
        "2024-06-01T10:00:02Z,loss,0.25,algo-2\n"
    )
    assert format_metrics_csv([]) == "timestamp,metric_name,value,host\n"


def test_rule_statuses() -> None:
    from trainops.cli._render import format_rule_statuses

    assert format_rule_statuses(DESCRIPTION) is None
    described = DESCRIPTION | {
        "ProfilerRuleEvaluationStatuses": [
            {
                "RuleConfigurationName": "StepOutlier",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "12 of 80 steps took longer than 0.4 s",
                "Evaluation": {
                    "Recommendation": "move the slow work out of the loop",
                    "Actions": [
                        {"Type": "stop_training", "Ok": True, "Detail": "the job is stopping"},
                        {"Type": "webhook", "Ok": False, "Detail": "POST http://h/***: HTTP 500"},
                    ],
                },
            },
            {
                "RuleConfigurationName": "LowGPUUtilization",
                "RuleEvaluationStatus": "NoIssuesFound",
                "StatusDetails": "no GPU metrics were recorded",
                "Evaluation": {"Recommendation": "", "Actions": []},
            },
        ]
    }
    expected = """Profiler rules:
  StepOutlier: IssuesFound: 12 of 80 steps took longer than 0.4 s
    Recommendation: move the slow work out of the loop
    Action stop_training done: the job is stopping
    Action webhook failed: POST http://h/***: HTTP 500
  LowGPUUtilization: NoIssuesFound: no GPU metrics were recorded"""
    assert format_rule_statuses(described) == expected
    assert expected in format_job_summary(described)
    debug = described | {
        "DebugRuleEvaluationStatuses": [
            {
                "RuleConfigurationName": "VanishingGradient",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "gradient fc.weight vanishes at step 3",
                "Evaluation": {"Recommendation": "check the initialization", "Actions": []},
            }
        ]
    }
    assert format_rule_statuses(debug) == expected + (
        "\nDebugger rules:\n  VanishingGradient: IssuesFound: gradient fc.weight vanishes at step 3"
        "\n    Recommendation: check the initialization"
    )
    # as `trainops describe` prints it: each status's Evaluation under Trainops, same path
    from trainops.server._schema import split_trainops

    assert format_rule_statuses(split_trainops(debug)) == format_rule_statuses(debug)


def test_a_spot_jobs_cost_comes_first_at_spot_labelled_an_estimate() -> None:
    cost = {**DESCRIPTION["Cost"], "SpotUsdPerHour": 0.0345, "SpotPriceKind": "estimate",
            "EstimatedSpotCostUsd": 0.00036414}  # fmt: skip
    spot = {**DESCRIPTION, "Cost": cost, "EnableManagedSpotTraining": True}
    assert format_cost(spot) == (
        "≈ $0.00036 at spot ($0.0345/h, an estimate); on-demand ≈ $0.0012 "
        "(ml.m5.large × 1 at $0.115/h, prices as of 2024-06-01)"
    )
    on_demand = {**spot, "EnableManagedSpotTraining": False}  # the spot figure is not its cost
    assert format_cost(on_demand) == format_cost(DESCRIPTION)


def test_a_rules_details_from_a_jobs_files_cannot_drive_the_terminal() -> None:
    """A tensor's name is the job's: shown in a rule's line, its control characters are escapes
    (no cursor movement, no forged line)."""
    from trainops.cli._render import format_rule_statuses

    hostile = DESCRIPTION | {
        "DebugRuleEvaluationStatuses": [
            {
                "RuleConfigurationName": "AllZero",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "100 % of \x1b[2J\nJob x: Completed is zero at step 0",
                "Evaluation": {
                    "Recommendation": "check\r",
                    "Actions": [{"Type": "stop_training", "Ok": True, "Detail": "\x07done"}],
                },
            }
        ]
    }
    shown = format_rule_statuses(hostile)
    assert shown == (
        "Debugger rules:\n"
        "  AllZero: IssuesFound: 100 % of \\x1b[2J\\nJob x: Completed is zero at step 0\n"
        "    Recommendation: check\\r\n"
        "    Action stop_training done: \\x07done"
    )
