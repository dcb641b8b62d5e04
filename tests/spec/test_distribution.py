"""The distribution section: SageMaker SDK shapes accepted, bad combinations refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from trainops import SpecError
from trainops.spec import JobSpec


def _spec(distribution: dict[str, Any], **fields: Any) -> JobSpec:
    fields.setdefault("entry_point", "train.py")
    return JobSpec(distribution=distribution, **fields)


@pytest.mark.parametrize(
    ("distribution", "launcher", "flags"),
    [
        ({}, "plain", {}),
        (
            {"torch_distributed": {"enabled": True}},
            "torch_distributed",
            {"sagemaker_torch_distributed_enabled": True},
        ),
        ({"pytorchddp": {"enabled": True}}, "pytorchddp", {"sagemaker_pytorch_ddp_enabled": True}),
        (
            {"mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-x A"}},
            "mpi",
            {
                "sagemaker_mpi_enabled": True,
                "sagemaker_mpi_num_of_processes_per_host": 2,
                "sagemaker_mpi_custom_mpi_options": "-x A",
            },
        ),
        (
            {"parameter_server": {"enabled": True}},
            "parameter_server",
            {"sagemaker_parameter_server_enabled": True},
        ),
        (
            {"multi_worker_mirrored_strategy": {"enabled": True}},
            "multi_worker_mirrored_strategy",
            {"sagemaker_multi_worker_mirrored_strategy_enabled": True},
        ),
        (
            {"smdistributed": {"dataparallel": {"enabled": True}}},
            "smdistributed.dataparallel",
            {
                "sagemaker_distributed_dataparallel_enabled": True,
                "sagemaker_distributed_dataparallel_custom_mpi_options": "",
            },
        ),
    ],
)
def test_sdk_shapes_and_the_flags_the_script_gets(
    distribution: dict[str, Any], launcher: str, flags: dict[str, Any]
) -> None:
    view = _spec(distribution).view().distribution
    assert view.launcher == launcher
    assert view.framework_hyperparameters() == flags


def test_processes_per_host_defaults_to_the_types_gpus_else_one() -> None:
    assert _spec({}).distribution.processes_per_host == 1
    gpu = _spec({"torch_distributed": {"enabled": True}}, instance_type="ml.g5.12xlarge")
    assert gpu.distribution.processes_per_host == gpu.instance.gpus == 4


def test_model_parallel_parameters_reach_the_script() -> None:
    parameters = {"pipeline_parallel_degree": 2, "microbatches": 4, "pipeline": "simple"}
    spec = _spec(
        {
            "processes_per_host": 2,
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": parameters}},
        }
    )
    assert spec.view().distribution.framework_hyperparameters() == {"mp_parameters": parameters}


@pytest.mark.parametrize(
    ("distribution", "fields", "message"),
    [
        (
            {"torch_distributed": {"enabled": True}, "mpi": {"enabled": True}},
            {},
            "more than one launcher enabled (torch_distributed, mpi)",
        ),
        (
            {"processes_per_host": 3},
            {},
            "3 processes on ml.m5.large, which has 2 vCPUs; set distribution.oversubscribe",
        ),
        (
            {"processes_per_host": 2, "mpi": {"enabled": True, "processes_per_host": 1}},
            {},
            "processes_per_host (2) and mpi.processes_per_host (1) disagree",
        ),
        (
            {"torch_distributed": {"enabled": True}},
            {"entry_point": "train.sh"},
            "torchrun runs Python scripts only",
        ),
        (
            {
                "processes_per_host": 2,
                "smdistributed": {
                    "modelparallel": {
                        "enabled": True,
                        "parameters": {"pipeline_parallel_degree": 3},
                    }
                },
            },
            {"instance_count": 2},
            "pipeline_parallel_degree 3 x tensor_parallel_degree 1 does not divide the world size 4",
        ),
        (
            {
                "processes_per_host": 2,
                "smdistributed": {
                    "modelparallel": {
                        "enabled": True,
                        "parameters": {"partitions": 2, "sharded_data_parallel_degree": 2},
                    }
                },
            },
            {"instance_count": 3},
            "sharded_data_parallel_degree 2 does not divide the data-parallel degree 3",
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"microbatches": 0}}
                }
            },
            {},
            "microbatches must be a whole number of at least 1",
        ),
        ({"instance_groups": []}, {}, "heterogeneous clusters are not supported"),
        ({"mpi": {"enabled": True, "processes_per_host": 0}}, {}, "greater than or equal to 1"),
    ],
)
def test_bad_combinations_are_refused_by_name(
    distribution: dict[str, Any], fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError) as caught:
        _spec(distribution, **fields)
    assert message in str(caught.value)
    assert "distribution" in str(caught.value)


def test_oversubscribe_allows_more_processes_than_cores() -> None:
    spec = _spec({"processes_per_host": 4, "oversubscribe": True})
    assert spec.distribution.processes_per_host == 4


def test_sharded_data_parallel_that_divides_is_accepted() -> None:
    spec = _spec(
        {
            "processes_per_host": 2,
            "smdistributed": {
                "modelparallel": {
                    "enabled": True,
                    "parameters": {"partitions": 1, "sharded_data_parallel_degree": 2},
                }
            },
        },
        instance_count=2,
    )
    assert spec.view().distribution.smdistributed.modelparallel.enabled


@pytest.mark.parametrize(
    ("distribution", "message"),
    [
        ({"mpi": {"enabled": True, "custom_mpi_options": "-x 'A"}}, "cannot be split"),
        ({"mpi": {"enabled": True, "custom_mpi_options": "-x A\0"}}, "NUL"),
        (
            {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"x": "y" * 3000}}
                }
            },
            "at most 2500",
        ),
        (
            {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"x": float("inf")}}
                }
            },
            "no inf or nan",
        ),
    ],
)
def test_hostile_distribution_values_are_refused(
    distribution: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        _spec(distribution)
