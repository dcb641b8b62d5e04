"""CreateHyperParameterTuningJob's request mapped to trainops' tuning declaration: every member
the API has lands on its field and the result is a valid ``TuningJobConfig``; the SDK's
multi-algorithm shape with one definition is the single one; problems are said at the member."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trainops.server._settings import ImageMapping
from trainops.server.aws import AwsError, service_model
from trainops.server.aws._tuning_request import api_field, tuning_request
from trainops.store import TuningTrialRecord
from trainops.tuner import trial_spec
from trainops.tuning import TuningJobConfig

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311"
CODE = "s3://bucket/code/sourcedir.tar.gz"


def _definition(**changes: Any) -> dict[str, Any]:
    return {
        "StaticHyperParameters": {
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": json.dumps(CODE),
            "epochs": "27",
        },
        "AlgorithmSpecification": {
            "TrainingImage": IMAGE,
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": "acc", "Regex": "acc=([0-9.]+)"}],
        },
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out/"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    } | changes


RANGES = {
    "ContinuousParameterRanges": [
        {"Name": "lr", "MinValue": "1e-4", "MaxValue": "0.1", "ScalingType": "Logarithmic"}
    ],
    "IntegerParameterRanges": [{"Name": "layers", "MinValue": "1", "MaxValue": "8"}],
    "CategoricalParameterRanges": [{"Name": "opt", "Values": ["sgd", "adam"]}],
}


def _request(**config: Any) -> dict[str, Any]:
    return {
        "HyperParameterTuningJobName": "sweep",
        "HyperParameterTuningJobConfig": {
            "Strategy": "Hyperband",
            "StrategyConfig": {"HyperbandStrategyConfig": {"MinResource": 3, "MaxResource": 27}},
            "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "acc"},
            "ResourceLimits": {
                "MaxNumberOfTrainingJobs": 30,
                "MaxParallelTrainingJobs": 3,
                "MaxRuntimeInSeconds": 3600,
            },
            "ParameterRanges": RANGES,
            "RandomSeed": 11,
            "TuningJobCompletionCriteria": {
                "TargetObjectiveMetricValue": 0.99,
                "BestObjectiveNotImproving": {"MaxNumberOfTrainingJobsNotImproving": 5},
                "ConvergenceDetected": {"CompleteOnConvergence": "Enabled"},
            },
        }
        | config,
        "TrainingJobDefinition": _definition(),
    }


def test_every_member_lands_on_its_field_and_the_config_is_valid() -> None:
    declared, code_uri = tuning_request(_request())
    assert code_uri == CODE
    config = TuningJobConfig(**declared)
    assert config.tuning_job_name == "sweep" and config.strategy.value == "Hyperband"
    hyperband = config.hyperband_resource()
    assert hyperband is not None
    assert (hyperband.hyperparameter, hyperband.min_resource, hyperband.max_resource) == (
        "epochs",
        3,
        27,
    )
    assert config.objective.metric_name == "acc" and config.objective.type.value == "Maximize"
    limits = config.resource_limits
    assert (limits.max_parallel_training_jobs, limits.max_runtime_in_seconds) == (3, 3600)
    assert config.max_training_jobs == 30 and config.random_seed == 11
    ranges = config.hyperparameter_ranges
    assert (ranges["lr"].min_value, ranges["lr"].scaling_type.value) == (1e-4, "Logarithmic")
    assert (ranges["layers"].type.value, ranges["layers"].max_value) == ("Integer", 8)
    assert ranges["opt"].values == ["sgd", "adam"]
    criteria = config.completion_criteria
    assert criteria is not None and criteria.target_objective_metric_value == 0.99
    assert criteria.best_objective_not_improving is not None
    assert criteria.convergence_detected is not None
    job = config.training_job
    assert job.entry_point == "train.py" and job.hyperparameters == {"epochs": 27}
    assert job.instance_type == "ml.m5.large"


def test_one_definition_in_the_list_is_the_single_one_with_its_own_objective_and_ranges() -> None:
    request = _request(Strategy="Random")
    config = request["HyperParameterTuningJobConfig"]
    del config["HyperParameterTuningJobObjective"], config["ParameterRanges"]
    del config["StrategyConfig"]
    own = {
        "DefinitionName": "est-1",
        "TuningObjective": {"Type": "Minimize", "MetricName": "acc"},
        "HyperParameterRanges": {"IntegerParameterRanges": RANGES["IntegerParameterRanges"]},
        "ResourceConfig": {
            "InstanceConfigs": [
                {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
                {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
            ]
        },
    }
    del request["TrainingJobDefinition"]
    request["TrainingJobDefinitions"] = [_definition(**own)]
    parsed = TuningJobConfig(**tuning_request(request)[0])
    assert parsed.objective.type.value == "Minimize"
    assert list(parsed.hyperparameter_ranges) == ["layers"]
    assert parsed.training_job.instance_type == "ml.c5.xlarge"  # the first the service would try


def test_a_warm_start_names_its_parents() -> None:
    request = _request(Strategy="Bayesian")
    del request["HyperParameterTuningJobConfig"]["StrategyConfig"]
    request["WarmStartConfig"] = {
        "ParentHyperParameterTuningJobs": [
            {"HyperParameterTuningJobName": "first"},
            {"HyperParameterTuningJobName": "second"},
        ],
        "WarmStartType": "IdenticalDataAndAlgorithm",
    }
    warm = TuningJobConfig(**tuning_request(request)[0]).warm_start_config
    assert warm is not None and warm.parents == ["first", "second"]
    assert warm.warm_start_type.value == "IdenticalDataAndAlgorithm"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"TrainingJobDefinition": None}, "TrainingJobDefinition is required"),
        ({"TrainingJobDefinitions": [_definition()]}, "not both"),
        ({"TrainingJobDefinition": _definition(StaticHyperParameters={"epochs": "3"})},
         "no sagemaker_submit_directory"),
        # what the SDK's warm-start tuners send: they leave the tuner's metric_definitions out
        ({"TrainingJobDefinition": _definition(AlgorithmSpecification={"TrainingImage": IMAGE})},
         "A metric is required for this hyperparameter tuning job objective. Provide a metric "
         "in the metric definitions: 'acc' is not among"),
    ],
)  # fmt: skip
def test_a_request_trainops_cannot_map_is_refused_saying_why(
    change: dict[str, Any], words: str
) -> None:
    request = {k: v for k, v in (_request() | change).items() if v is not None}
    with pytest.raises(AwsError) as caught:
        tuning_request(request)
    assert caught.value.code == "ValidationException" and words in caught.value.message


def test_our_field_paths_are_said_as_the_request_s_members() -> None:
    assert api_field("resource_limits.max_parallel_training_jobs") == (
        "HyperParameterTuningJobConfig.ResourceLimits.max_parallel_training_jobs"
    )
    assert api_field("training_job.hyperparameters.lr") == (
        "TrainingJobDefinition.StaticHyperParameters.lr"
    )
    assert api_field("training_job.instance_count") == "TrainingJobDefinition.instance_count"
    assert api_field("warm_start_config.parents.1") == (
        "WarmStartConfig.ParentHyperParameterTuningJobs.1"
    )
    assert api_field("something_else") == "something_else"


def test_the_training_image_runs_on_the_python_the_server_maps_it_to() -> None:
    """The trials run where a CreateTrainingJob of the same image would (a tuning job whose
    trials ran on the server's own Python could not import what the image's Python has)."""
    images = (ImageMapping.parse("pytorch:2.3=/opt/envs/torch23/bin/python"),)
    declared, _ = tuning_request(_request(), images)
    assert TuningJobConfig(**declared).training_job.python == "/opt/envs/torch23/bin/python"
    unmapped = (ImageMapping.parse("sklearn=server"),)
    with pytest.raises(AwsError, match="has no mapping on this trainops server"):
        tuning_request(_request(), unmapped)


def test_a_categorical_value_the_sdk_encoded_reaches_the_script_unwrapped() -> None:
    """The SDK v2 sends a framework estimator's Categorical values JSON-encoded, boto3 and the
    SDK v3 as plain text; the trial's job gets them as the training toolkit reads them, the
    static ones too."""
    ranges = RANGES | {
        "CategoricalParameterRanges": [
            {"Name": "batch-size", "Values": ['"32"']},  # the SDK v2's framework estimators
            {"Name": "workers", "Values": ["4"]},  # boto3, the SDK v3
        ]
    }
    definition = _definition()
    definition["StaticHyperParameters"] |= {"backend": '"gloo"'}
    request = _request(ParameterRanges=ranges) | {"TrainingJobDefinition": definition}
    config = TuningJobConfig(**tuning_request(request)[0])
    assert config.hyperparameter_ranges["batch-size"].values == ['"32"']  # kept as sent
    assert config.hyperparameter_ranges["workers"].values == ["4"]
    trial = TuningTrialRecord(
        tuning_job="sweep",
        number=1,
        training_job="sweep-001-abc",
        hyperparameters={
            "lr": 0.01,
            "layers": 2,
            "opt": "adam",
            "batch-size": '"32"',
            "workers": "4",
        },
        status="Pending",
        creation_time=1.0,
    )
    values = trial_spec(config, trial).hyperparameters
    # as the toolkit reads the text: a JSON string its string, a JSON number the number
    assert values["batch-size"] == "32" and values["workers"] == 4 and values["backend"] == "gloo"
    assert values["epochs"] == 27
    assert (values["lr"], values["layers"], values["opt"]) == (0.01, 2, "adam")
    assert values["_tuning_objective_metric"] == "acc"


def test_the_sdk_s_tuning_resource_config_sets_the_trials_instances() -> None:
    """The SageMaker SDK sends a tuner's estimator's instances as the definition's
    HyperParameterTuningResourceConfig (not ResourceConfig): the trials run on them."""
    hpo = {"InstanceType": "ml.c5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30}
    definition = _definition(HyperParameterTuningResourceConfig=hpo)
    del definition["ResourceConfig"]
    request = _request() | {"TrainingJobDefinition": definition}
    job = TuningJobConfig(**tuning_request(request)[0]).training_job
    assert (job.instance_type, job.instance_count) == ("ml.c5.xlarge", 2)
    listed = {
        "AllocationStrategy": "Prioritized",
        "InstanceConfigs": [
            {"InstanceType": "ml.m5.xlarge", "InstanceCount": 3, "VolumeSizeInGB": 30},
            {"InstanceType": "ml.m5.large", "InstanceCount": 3, "VolumeSizeInGB": 30},
        ],
    }
    definition["HyperParameterTuningResourceConfig"] = listed
    job = TuningJobConfig(**tuning_request(request)[0]).training_job
    assert (job.instance_type, job.instance_count) == ("ml.m5.xlarge", 3)
    both = _definition(HyperParameterTuningResourceConfig=hpo)
    with pytest.raises(AwsError, match="both ResourceConfig and HyperParameterTuningResource"):
        tuning_request(_request() | {"TrainingJobDefinition": both})


# The definition's members that CreateTrainingJob's request has not, and where each goes.
_TUNING_ONLY = {
    "DefinitionName": "names the one definition of TrainingJobDefinitions",
    "TuningObjective": "that definition's objective",
    "HyperParameterRanges": "that definition's ranges",
    "StaticHyperParameters": "the trials' hyperparameters besides the tuned ones",
    "HyperParameterTuningResourceConfig": "the trials' instances, as ResourceConfig",
}


def test_every_member_of_the_definition_is_mapped() -> None:
    """A member of the API's training job definition is either one CreateTrainingJob's mapping
    takes (``spec_of``), or one said here: a member botocore adds fails this, so that it is not
    left unread (as HyperParameterTuningResourceConfig once was)."""
    model = service_model("sagemaker")
    definition = model.shape_for("HyperParameterTrainingJobDefinition").members
    training = model.operation_model("CreateTrainingJob").input_shape.members
    unknown = sorted(set(definition) - set(training) - set(_TUNING_ONLY))
    assert unknown == [], f"members no mapping reads: {unknown}"
    assert set(_TUNING_ONLY) <= set(definition)  # none listed that the model has not
