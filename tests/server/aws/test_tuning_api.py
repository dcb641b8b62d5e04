"""The SageMaker tuning operations on the server's port, driven by botocore's own client: a tiny
tuning job created, described until Completed, its training jobs listed (filters, sort, paging);
another stopped; the service's refusals in its words, each said at the request's member."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.control._harness import ControlPlane, wait_for
from tests.server.aws._clients import sagemaker_client
from trainops.server.aws import derive_credentials

pytestmark = pytest.mark.slow

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311"


def _client(plane: ControlPlane) -> Any:
    assert plane.server.token is not None
    return sagemaker_client(plane.server.url, derive_credentials(plane.server.token))


def _code(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


def _request(plane: ControlPlane, name: str, jobs: int = 3, **env: str) -> dict[str, Any]:
    definition = {
        "StaticHyperParameters": {
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": json.dumps(plane.code_uri),
            "sagemaker_estimator_class_name": '"PyTorch"',
            "_tuning_objective_metric": '"loss"',  # the SDK may send it; the platform sets it
            "epochs": "3",
        },
        "AlgorithmSpecification": {
            "TrainingImage": IMAGE,
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
        },
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": {"S3OutputPath": plane.server.settings.default_output_uri},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "Environment": {"FAKE_LINES": "2", "API_TOKEN": "s3cr3t-value", **env},
    }
    config = {
        "Strategy": "Random",
        "HyperParameterTuningJobObjective": {"Type": "Minimize", "MetricName": "loss"},
        "ResourceLimits": {"MaxNumberOfTrainingJobs": jobs, "MaxParallelTrainingJobs": 2},
        "ParameterRanges": {
            "ContinuousParameterRanges": [
                {"Name": "lr", "MinValue": "0.001", "MaxValue": "0.1", "ScalingType": "Logarithmic"}
            ],
            "IntegerParameterRanges": [{"Name": "layers", "MinValue": "1", "MaxValue": "4"}],
            # JSON-encoded, as the SDK sends a framework estimator's Categorical values
            "CategoricalParameterRanges": [{"Name": "optimizer", "Values": ['"sgd"', '"adam"']}],
        },
        "RandomSeed": 7,
        "TrainingJobEarlyStoppingType": "Off",
    }
    return {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobConfig": config,
        "TrainingJobDefinition": definition,
        "Tags": [{"Key": "team", "Value": "vision"}],
    }


def _status(client: Any, name: str) -> str:
    described = client.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
    return str(described["HyperParameterTuningJobStatus"])


def test_a_tuning_job_runs_and_its_trials_are_listed(plane: ControlPlane) -> None:
    client = _client(plane)
    made = client.create_hyper_parameter_tuning_job(**_request(plane, "tiny"))
    arn = "arn:aws:sagemaker:us-east-1:000000000000:hyper-parameter-tuning-job/tiny"
    assert made["HyperParameterTuningJobArn"] == arn
    assert client.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "team", "Value": "vision"}]
    wait_for(lambda: _status(client, "tiny") == "Completed", 120, "tiny Completed")
    job = client.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="tiny")
    assert job["HyperParameterTuningJobArn"] == arn
    assert job["TrainingJobStatusCounters"]["Completed"] == 3
    assert job["ObjectiveStatusCounters"] == {"Succeeded": 3, "Pending": 0, "Failed": 0}
    config = job["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Random" and config["RandomSeed"] == 7
    assert config["ParameterRanges"]["IntegerParameterRanges"] == [
        {"Name": "layers", "MinValue": "1", "MaxValue": "4", "ScalingType": "Auto"}
    ]
    best = job["BestTrainingJob"]
    assert best["TrainingJobArn"].endswith(f":training-job/{best['TrainingJobName']}")
    assert best["FinalHyperParameterTuningJobObjectiveMetric"]["MetricName"] == "loss"
    definition = job["TrainingJobDefinition"]
    sent = _request(plane, "tiny")["TrainingJobDefinition"]
    # as the request sent them (the SDK's HyperparameterTuner.attach reads them back)
    assert definition["StaticHyperParameters"] == sent["StaticHyperParameters"]
    assert definition["RoleArn"] == sent["RoleArn"]
    assert definition["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert definition["ResourceConfig"]["VolumeSizeInGB"] == 1
    trial = client.describe_training_job(TrainingJobName=best["TrainingJobName"])
    assert trial["RoleArn"] == sent["RoleArn"]
    assert trial["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert trial["TuningJobArn"] == arn
    assert definition["Environment"]["API_TOKEN"] != "s3cr3t-value"  # masked, as describe does
    assert definition["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    assert "Cost" not in job and "TrainingJobs" not in job  # ours, not the API's

    paginator = client.get_paginator("list_training_jobs_for_hyper_parameter_tuning_job")
    pages = paginator.paginate(
        HyperParameterTuningJobName="tiny",
        SortBy="FinalObjectiveMetricValue",
        SortOrder="Ascending",
        PaginationConfig={"PageSize": 2},
    )
    sizes, summaries = [], []
    for page in pages:
        sizes.append(len(page["TrainingJobSummaries"]))
        summaries += page["TrainingJobSummaries"]
    assert sizes == [2, 1]
    values = [s["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] for s in summaries]
    assert values == sorted(values)
    for summary in summaries:
        assert summary["TuningJobName"] == "tiny" and summary["ObjectiveStatus"] == "Succeeded"
        tuned = summary["TunedHyperParameters"]
        assert set(tuned) == {"lr", "layers", "optimizer"}
        assert 0.001 <= float(tuned["lr"]) <= 0.1 and tuned["optimizer"] in ('"sgd"', '"adam"')
        trial = client.describe_training_job(TrainingJobName=summary["TrainingJobName"])
        # as the service gives a trial's: the static ones as sent (the SDK's best_estimator
        # attaches to the trial and json-decodes each), the tuned ones as TunedHyperParameters
        assert trial["HyperParameters"] == {
            k: v
            for k, v in sent["StaticHyperParameters"].items()
            if k != "_tuning_objective_metric"
        } | tuned | {"_tuning_objective_metric": "loss"}
        # and the script gets what the training toolkit reads from them
        runs = plane.describe(summary["TrainingJobName"])["HyperParameters"]
        assert (
            runs["optimizer"] == json.loads(tuned["optimizer"]) and "sagemaker_program" not in runs
        )
        assert trial["TuningJobArn"] == arn  # the service names a trial's tuning job
    failed = client.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="tiny", StatusEquals="Failed"
    )
    assert failed["TrainingJobSummaries"] == []


def test_a_definition_sent_in_a_list_is_given_back_in_one_and_named(plane: ControlPlane) -> None:
    """What the SDK's ``HyperparameterTuner.create(estimator_dict=...)`` sends: the objective and
    the ranges in a named definition of TrainingJobDefinitions. The answers are the service's:
    the definition in the list, the objective and ranges in it and not in the config (the SDK's
    attach fails otherwise), each trial's summary naming its definition (its best_estimator
    reads it)."""
    client = _client(plane)
    request = _request(plane, "listed", jobs=2)
    config = request["HyperParameterTuningJobConfig"]
    definition = request.pop("TrainingJobDefinition") | {
        "DefinitionName": "est-a",
        "TuningObjective": config.pop("HyperParameterTuningJobObjective"),
        "HyperParameterRanges": config.pop("ParameterRanges"),
    }
    client.create_hyper_parameter_tuning_job(**request, TrainingJobDefinitions=[definition])
    wait_for(lambda: _status(client, "listed") == "Completed", 120, "listed Completed")
    job = client.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="listed")
    assert "TrainingJobDefinition" not in job
    (given,) = job["TrainingJobDefinitions"]
    assert given["DefinitionName"] == "est-a"
    assert given["TuningObjective"] == {"Type": "Minimize", "MetricName": "loss"}
    assert given["HyperParameterRanges"]["CategoricalParameterRanges"] == [
        {"Name": "optimizer", "Values": ['"sgd"', '"adam"']}
    ]
    assert given["StaticHyperParameters"]["sagemaker_program"] == '"train.py"'
    searched = job["HyperParameterTuningJobConfig"]
    assert "HyperParameterTuningJobObjective" not in searched and "ParameterRanges" not in searched
    assert job["BestTrainingJob"]["TrainingJobDefinitionName"] == "est-a"
    listed = client.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="listed"
    )["TrainingJobSummaries"]
    assert [s["TrainingJobDefinitionName"] for s in listed] == ["est-a", "est-a"]


def test_stop_ends_a_tuning_job_stopped_and_a_second_stop_is_refused(
    plane: ControlPlane,
) -> None:
    client = _client(plane)
    request = _request(plane, "halted", jobs=4, FAKE_HANG_ATTEMPTS="1")
    del request["TrainingJobDefinition"]["StaticHyperParameters"]["_tuning_objective_metric"]
    client.create_hyper_parameter_tuning_job(**request)
    # not sent, given back as the service gives it (the SDK's HyperparameterTuner.attach needs it)
    described = client.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="halted")
    assert (
        described["TrainingJobDefinition"]["StaticHyperParameters"]["_tuning_objective_metric"]
        == "loss"
    )
    store = plane.server.controller.store
    wait_for(lambda: len(store.trials("halted")) == 2, 60, "two trials running")
    client.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="halted")
    assert _status(client, "halted") in ("Stopping", "Stopped")
    wait_for(lambda: _status(client, "halted") == "Stopped", 120, "halted Stopped")
    job = client.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="halted")
    assert job["TrainingJobStatusCounters"]["Stopped"] == 2
    with pytest.raises(ClientError) as caught:
        client.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName="halted")
    assert _code(caught) == (
        "ValidationException",
        "The request was rejected because the tuning job is in status Stopped.",
    )


def test_list_tuning_jobs_filters_sorts_and_pages(plane: ControlPlane) -> None:
    client = _client(plane)
    for name in ("sweep-b", "sweep-a", "other"):
        client.create_hyper_parameter_tuning_job(**_request(plane, name, jobs=1))
    for name in ("sweep-b", "sweep-a", "other"):
        wait_for(lambda n=name: _status(client, n) == "Completed", 120, f"{name} Completed")
    pages = client.get_paginator("list_hyper_parameter_tuning_jobs").paginate(
        NameContains="SWEEP", PaginationConfig={"PageSize": 1}
    )
    seen = [[s["HyperParameterTuningJobName"] for s in p["HyperParameterTuningJobSummaries"]]
            for p in pages]  # fmt: skip
    assert seen == [["sweep-a"], ["sweep-b"]]  # by Name, Ascending: the service's defaults
    newest = client.list_hyper_parameter_tuning_jobs(SortBy="CreationTime", SortOrder="Descending")
    summaries = newest["HyperParameterTuningJobSummaries"]
    assert [s["HyperParameterTuningJobName"] for s in summaries] == ["other", "sweep-a", "sweep-b"]
    first = summaries[0]
    assert first["Strategy"] == "Random" and first["TrainingJobStatusCounters"]["Completed"] == 1
    assert first["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 1, "MaxParallelTrainingJobs": 2}
    created = first["CreationTime"]  # a time read from an answer names that same moment
    assert (
        client.list_hyper_parameter_tuning_jobs(CreationTimeAfter=created)[
            "HyperParameterTuningJobSummaries"
        ]
        == []
    )
    before = client.list_hyper_parameter_tuning_jobs(
        CreationTimeBefore=created, LastModifiedTimeAfter=datetime(2020, 1, 1)
    )
    names = [s["HyperParameterTuningJobName"] for s in before["HyperParameterTuningJobSummaries"]]
    assert names == ["sweep-a", "sweep-b"]
    hour = timedelta(hours=1)
    assert (
        client.list_hyper_parameter_tuning_jobs(LastModifiedTimeBefore=created - hour)[
            "HyperParameterTuningJobSummaries"
        ]
        == []
    )
    running = client.list_hyper_parameter_tuning_jobs(StatusEquals="InProgress")
    assert running["HyperParameterTuningJobSummaries"] == []
    with pytest.raises(ClientError) as caught:
        client.list_hyper_parameter_tuning_jobs(NextToken="forged")
    assert _code(caught) == ("ValidationException", "Invalid pagination token")


def test_refusals_are_the_services_and_name_the_member(plane: ControlPlane) -> None:
    client = _client(plane)
    base = _request(plane, "refused")
    config = base["HyperParameterTuningJobConfig"]
    definition = base["TrainingJobDefinition"]
    two = {"TrainingJobDefinitions": [definition, definition], "TrainingJobDefinition": None}
    bad_metric = {"Type": "Minimize", "MetricName": "accuracy"}
    for changes, words in [
        (two, "trainops runs one training job definition per tuning job"),
        ({"HyperParameterTuningJobConfig": config | {"HyperParameterTuningJobObjective": bad_metric}},
         "A metric is required for this hyperparameter tuning job objective. Provide a metric "
         "in the metric definitions: 'accuracy' is not among TrainingJobDefinition."
         "AlgorithmSpecification.MetricDefinitions"),
        ({"HyperParameterTuningJobConfig": config | {"ParameterRanges": {
            "ContinuousParameterRanges": [{"Name": "lr", "MinValue": "x", "MaxValue": "1"}]}}},
         "MinValue 'x' of the Continuous range of 'lr' is not a finite number"),
        ({"HyperParameterTuningJobConfig": config | {"ParameterRanges": {
            "IntegerParameterRanges": [{"Name": "n", "MinValue": "9", "MaxValue": "2"}]}}},
         "HyperParameterTuningJobConfig.ParameterRanges.n"),
        ({"WarmStartConfig": {"ParentHyperParameterTuningJobs": [
            {"HyperParameterTuningJobName": "ghost"}], "WarmStartType": "TransferLearning"}},
         "WarmStartConfig.ParentHyperParameterTuningJobs.0: no tuning job named 'ghost'"),
        ({"HyperParameterTuningJobName": "x" * 33}, "at 'hyperParameterTuningJobName'"),
        ({"HyperParameterTuningJobConfig": config | {"ParameterRanges": {
            "ContinuousParameterRanges": [{"Name": "lr", "MinValue": "0", "MaxValue": "1e309"}]}}},
         "MaxValue '1e309' of the Continuous range of 'lr' is not a finite number"),
        ({"HyperParameterTuningJobConfig": config | {"ParameterRanges": {
            "IntegerParameterRanges": [{"Name": "n", "MinValue": "1.5", "MaxValue": "2"}]}}},
         "MinValue '1.5' of the Integer range of 'n' is not an integer"),
        ({"HyperParameterTuningJobConfig": config | {"ParameterRanges": {
            "CategoricalParameterRanges": [{"Name": "a=b\x00", "Values": ["x"]}]}}},
         "must not contain '=' or NUL"),
        ({"HyperParameterTuningJobConfig": config | {"ParameterRanges": {
            "CategoricalParameterRanges": [{"Name": "a", "Values": ["x"]}],
            "IntegerParameterRanges": [{"Name": "a", "MinValue": "1", "MaxValue": "2"}]}}},
         "names hyperparameter 'a' more than once"),
        ({"HyperParameterTuningJobConfig": config | {"ParameterRanges": {
            "ContinuousParameterRanges": [{"Name": f"p{i}", "MinValue": "0", "MaxValue": "1"}
                                          for i in range(30)],
            "IntegerParameterRanges": [{"Name": "n", "MinValue": "1", "MaxValue": "2"}]}}},
         "at most 30 hyperparameters are tuned"),
        ({"Autotune": {"Mode": "Enabled"}}, "Autotune and AutoParameters are not supported"),
        ({"TrainingJobDefinition": definition | {"AlgorithmSpecification": {
            "TrainingImage": "example.com/mine:1", "TrainingInputMode": "File"}}},
         "has no mapping on this trainops server"),
    ]:  # fmt: skip
        request = {k: v for k, v in (base | changes).items() if v is not None}
        with pytest.raises(ClientError) as caught:
            client.create_hyper_parameter_tuning_job(**request)
        code, message = _code(caught)
        assert code == "ValidationException" and words in message, message
    assert plane.server.controller.store.list_tuning_jobs() == []
    client.create_hyper_parameter_tuning_job(**base)
    with pytest.raises(ClientError) as caught:
        client.create_hyper_parameter_tuning_job(**base)
    code, message = _code(caught)
    assert (code, message) == (
        "ResourceInUse",
        "A hyperparameter tuning job with the name, refused, already exists. Choose a different "
        "name.",
    )
    with pytest.raises(ClientError) as caught:  # names are not case sensitive
        client.create_hyper_parameter_tuning_job(
            **base | {"HyperParameterTuningJobName": "REFUSED"}
        )
    assert _code(caught)[0] == "ResourceInUse"
    upper = client.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="Refused")
    assert upper["HyperParameterTuningJobName"] == "refused"
    for call in (
        client.describe_hyper_parameter_tuning_job,
        client.stop_hyper_parameter_tuning_job,
        client.list_training_jobs_for_hyper_parameter_tuning_job,
    ):
        with pytest.raises(ClientError) as caught:
            call(HyperParameterTuningJobName="nowhere")
        assert _code(caught) == (
            "ResourceNotFound",
            "Amazon SageMaker can't find a tuning job called nowhere. Type another name.",
        )


def test_a_trial_s_failure_reason_is_masked_as_its_job_masks_it(plane: ControlPlane) -> None:
    client = _client(plane)
    reason = "AlgorithmError: token s3cr3t-value refused"
    request = _request(plane, "leaky", jobs=1, FAKE_FAIL_HOST="algo-1", FAKE_FAIL_REASON=reason)
    client.create_hyper_parameter_tuning_job(**request)
    wait_for(lambda: _status(client, "leaky") == "Failed", 120, "leaky Failed")  # none succeeded
    listed = client.list_training_jobs_for_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="leaky"
    )["TrainingJobSummaries"]
    assert listed[0]["TrainingJobStatus"] == "Failed"
    assert listed[0]["FailureReason"] == "AlgorithmError: token *** refused"
    described = client.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName="leaky")
    rest = plane.client.get("/api/v1/tuning-jobs/leaky")
    assert "s3cr3t-value" not in repr(described) and "s3cr3t-value" not in rest.text


def test_a_create_whose_tags_cannot_be_written_leaves_no_tuning_job(plane: ControlPlane) -> None:
    """The tuning job, its tags and its kept request are one transaction: the tags' write fails
    here (tags left under the name would go over the limit), so none of them is recorded."""
    store = plane.server.controller.store
    kind = "hyper-parameter-tuning-job"
    store.put_tags(kind, "doomed", {f"k{i}": "v" for i in range(50)}, 50)
    with pytest.raises(ClientError) as caught:
        _client(plane).create_hyper_parameter_tuning_job(**_request(plane, "doomed"))
    assert _code(caught) == (
        "ResourceLimitExceeded",
        "A resource can have at most 50 tags; this request would give it 51.",
    )
    assert store.get_tuning_job("doomed") is None
    assert store.api_request(kind, "doomed") == {}
    assert dict(store.tags(kind, "doomed")) == {f"k{i}": "v" for i in range(50)}
