"""The typed view of a submitted job mirrors the spec models field for field, and is strict."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest
from pydantic import BaseModel

from trainops.protocol import (
    DEFAULT_CHECKPOINT_PATH,
    Assignment,
    ChannelSpec,
    ChaosPlan,
    CheckpointSpec,
    DataParallelSpec,
    DistributionSpec,
    EnabledSpec,
    HostResources,
    MetricSpec,
    ModelParallelSpec,
    MpiSpec,
    RetrySpec,
    SmDistributedSpec,
    SpecViewError,
    StoppingSpec,
    SubmittedJob,
)
from trainops.spec import (
    Channel,
    ChaosSpec,
    CheckpointConfig,
    DataParallelConfig,
    DistributionConfig,
    Enabled,
    JobSpec,
    MetricDefinition,
    ModelParallelConfig,
    MpiConfig,
    RetryStrategy,
    SmDistributedConfig,
    StoppingCondition,
)

PAIRS: list[tuple[type, type[BaseModel], set[str]]] = [
    (SubmittedJob, JobSpec, set()),
    (ChannelSpec, Channel, {"name"}),  # the channel's key in ``inputs``
    (MetricSpec, MetricDefinition, set()),
    (CheckpointSpec, CheckpointConfig, set()),
    (ChaosPlan, ChaosSpec, set()),
    (StoppingSpec, StoppingCondition, set()),
    (RetrySpec, RetryStrategy, set()),
    (DistributionSpec, DistributionConfig, set()),
    (EnabledSpec, Enabled, set()),
    (MpiSpec, MpiConfig, set()),
    (DataParallelSpec, DataParallelConfig, set()),
    (ModelParallelSpec, ModelParallelConfig, set()),
    (SmDistributedSpec, SmDistributedConfig, set()),
]


def _full() -> JobSpec:
    return JobSpec(
        entry_point="train.py",
        source_dir="/src",
        base_job_name="base",
        hyperparameters={"lr": 0.1, "layers": [1, 2], "name": "x"},
        instance_type="ml.m5.xlarge",
        instance_count=2,
        environment={"A": "1"},
        inputs={"train": {"uri": "s3://b/t/", "distribution": "ShardedByKey", "shuffle_seed": 3}},
        output_path="s3://b/out",
        checkpoint={"uri": "s3://b/ckpt"},
        metric_definitions=[{"name": "loss", "regex": "loss=([0-9.]+)"}],
        stopping_condition={
            "max_runtime_in_seconds": 60,
            "grace_period_in_seconds": 5,
            "max_wait_time_in_seconds": 90,
        },
        retry_strategy={"maximum_retry_attempts": 2},
        use_spot_instances=True,
        chaos={"seed": 7, "interruptions": 3, "capacity_gap_seconds": [1, 2], "hosts": "all"},
        distribution={
            "mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-x A"},
            "smdistributed": {
                "modelparallel": {"enabled": True, "parameters": {"pipeline_parallel_degree": 2}}
            },
        },
    )


@pytest.mark.parametrize(
    ("view", "model", "extra"), PAIRS, ids=lambda p: getattr(p, "__name__", "")
)
def test_the_view_has_exactly_the_models_fields(
    view: type, model: type[BaseModel], extra: set[str]
) -> None:
    # A field added to the spec and not to the view (or the reverse) fails here.
    assert {f.name for f in fields(view)} == set(model.model_fields) | extra


def test_the_view_has_no_defaults_of_its_own() -> None:
    # The spec models hold the only copy of every default.
    with_defaults = [
        f"{view.__name__}.{f.name}"
        for view, _, _ in PAIRS
        for f in fields(view)
        if f.default is not f.default_factory  # both MISSING unless a default is declared
    ]
    assert with_defaults == []


def test_the_json_round_trips_to_the_models_dump() -> None:
    spec = _full()
    dump = spec.model_dump(mode="json")
    assert spec.view().to_json() == dump
    assert SubmittedJob.from_json(dump) == spec.view()


def test_defaults_come_from_the_spec_models() -> None:
    view = JobSpec(entry_point="train.py").view()
    assert view.instance_type == JobSpec.model_fields["instance_type"].default
    assert view.stopping_condition == StoppingSpec(86400, 120, None)
    assert view.checkpoint is None and view.checkpoint_local_path == DEFAULT_CHECKPOINT_PATH
    assert _full().view().checkpoint_local_path == DEFAULT_CHECKPOINT_PATH


def test_the_views_parts_read_as_typed_values() -> None:
    view = _full().view()
    assert view.inputs[0].name == "train" and view.inputs[0].sharded
    assert view.metric_definitions == (MetricSpec("loss", "loss=([0-9.]+)"),)
    assert view.grace_seconds == 5.0 and view.checkpoint_uri == "s3://b/ckpt"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("instance_type"), "spec: missing instance_type"),
        (lambda d: d.update(colour="red"), "spec: unknown colour"),
        (lambda d: d["stopping_condition"].pop("max_runtime_in_seconds"), "stopping_condition"),
        (lambda d: d["inputs"]["train"].pop("mode"), "inputs.train: missing mode"),
        (lambda d: d.update(metric_definitions=[{"name": "x"}]), "metric_definitions[0]"),
        (lambda d: d.update(inputs=[]), "expected a mapping"),
    ],
)
def test_a_stored_spec_of_another_shape_is_refused_by_name(change: Any, message: str) -> None:
    dump = _full().model_dump(mode="json")
    change(dump)
    with pytest.raises(SpecViewError, match=message.replace("[", r"\[").replace("]", r"\]")):
        SubmittedJob.from_json(dump)


def test_an_assignment_carries_the_view_through_json() -> None:
    assignment = Assignment(
        job_name="j",
        attempt=1,
        current_host="algo-1",
        hosts=["algo-1", "algo-2"],
        spec=_full().view(),
        code_uri="file:///c.tar.gz",
        output_prefix="file:///out/j",
        resources=HostResources(cpus=[0], gpus=[], memory_mb=10),
    )
    raw = assignment.to_json()
    assert raw["spec"] == _full().model_dump(mode="json")
    assert Assignment.from_json(raw) == assignment


def test_a_spec_stored_before_spot_reads_as_on_demand() -> None:
    dump = _full().model_dump(mode="json")
    del dump["use_spot_instances"], dump["chaos"]
    del dump["stopping_condition"]["max_wait_time_in_seconds"]
    view = SubmittedJob.from_json(dump)
    assert (view.use_spot_instances, view.chaos, view.max_wait_seconds) == (False, None, None)
    assert view.stopping_condition.max_wait_time_in_seconds is None
