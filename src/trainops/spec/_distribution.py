"""The ``distribution`` section: how many processes each host runs and how they are launched.

The shapes are the SageMaker Python SDK's ``distribution=`` argument, so an Estimator's value
can be copied over as it is. One launcher at most (``torch_distributed``, ``pytorchddp``,
``mpi``, ``parameter_server``, ``multi_worker_mirrored_strategy`` or
``smdistributed.dataparallel``); ``smdistributed.modelparallel`` describes how the model is
split and combines with any of them. ``processes_per_host`` defaults to the instance type's GPU
count, else 1, and is resolved when the spec is validated, so the stored spec holds the number
every host will run.
"""

from __future__ import annotations

import json
import shlex
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator

from trainops.catalog import InstanceType
from trainops.protocol import LAUNCHER_FLAGS
from trainops.spec._base import SpecModel

__all__ = [
    "DataParallelConfig",
    "DistributionConfig",
    "Enabled",
    "ModelParallelConfig",
    "MpiConfig",
    "SmDistributedConfig",
    "check_distribution",
    "launchers_enabled",
]

MAX_PROCESSES_PER_HOST = 256
MAX_PARAMETERS_CHARS = 2500  # a hyperparameter value's limit: mp_parameters is one
PIPELINES = ("simple", "interleaved")
# The model-parallel parameters trainops reads; others are passed on to the script untouched.
DEGREE_PARAMETERS = (
    "pipeline_parallel_degree",
    "partitions",
    "tensor_parallel_degree",
    "sharded_data_parallel_degree",
)


class Enabled(SpecModel):
    """A switch: ``{enabled: true}``."""

    enabled: bool = False


def _check_options(value: str) -> str:
    """Options are split like a command line (never run by a shell): they must split."""
    try:
        shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"cannot be split into arguments: {exc}") from None
    if "\0" in value:
        raise ValueError("must not contain a NUL character")
    return value


# ``custom_mpi_options`` of mpi and of smdistributed.dataparallel: passed to mpirun as arguments.
MpiOptions = Annotated[str, Field(max_length=4096), AfterValidator(_check_options)]


class MpiConfig(SpecModel):
    """``mpirun`` across the job's hosts, as SageMaker's MPI runner does."""

    enabled: bool = False
    processes_per_host: int | None = Field(default=None, ge=1, le=MAX_PROCESSES_PER_HOST)
    custom_mpi_options: MpiOptions = ""


class DataParallelConfig(SpecModel):
    """Topology-aware data parallel (SageMaker's ``smdistributed.dataparallel``)."""

    enabled: bool = False
    custom_mpi_options: MpiOptions = ""


class ModelParallelConfig(SpecModel):
    """Pipeline and sharded parallelism (SageMaker's ``smdistributed.modelparallel``)."""

    enabled: bool = False
    parameters: dict[str, Any] = Field(default_factory=dict)

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            encoded = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError("must be plain JSON values (no inf or nan)") from None
        if "\\u0000" in encoded or "\\ud8" in encoded or "\\udc" in encoded:
            # They become a command-line argument: no NUL, no lone surrogate can be one.
            raise ValueError("must not contain a NUL character or an unpaired surrogate")
        if len(encoded) > MAX_PARAMETERS_CHARS:
            # They reach the script as the hyperparameter mp_parameters (SageMaker's limit).
            raise ValueError(
                f"are {len(encoded)} characters as JSON; at most {MAX_PARAMETERS_CHARS}"
            )
        for name in (*DEGREE_PARAMETERS, "microbatches"):
            if name in value:
                degree = value[name]
                if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
                    raise ValueError(f"{name} must be a whole number of at least 1")
        pipeline = value.get("pipeline", "interleaved")
        if pipeline not in PIPELINES:
            raise ValueError(f"pipeline {pipeline!r}: use 'simple' (GPipe) or 'interleaved' (1F1B)")
        return value

    def degree(self, name: str) -> int:
        value = self.parameters.get(name, 1)
        return int(value)

    @property
    def pipeline_degree(self) -> int:
        return int(self.parameters.get("pipeline_parallel_degree", self.degree("partitions")))


class SmDistributedConfig(SpecModel):
    """SageMaker's distributed libraries: data parallel and model parallel."""

    dataparallel: DataParallelConfig = Field(default_factory=DataParallelConfig)
    modelparallel: ModelParallelConfig = Field(default_factory=ModelParallelConfig)


class DistributionConfig(SpecModel):
    """Processes per host and how they start; empty means one plain process per host."""

    sdk_arguments = {
        "instance_groups": (
            "heterogeneous clusters are not supported by trainops; use one instance_type"
        ),
        "pytorchxla": "is not supported by trainops (no XLA devices); use torch_distributed",
    }

    torch_distributed: Enabled = Field(default_factory=Enabled)
    pytorchddp: Enabled = Field(default_factory=Enabled)
    mpi: MpiConfig = Field(default_factory=MpiConfig)
    parameter_server: Enabled = Field(default_factory=Enabled)
    multi_worker_mirrored_strategy: Enabled = Field(default_factory=Enabled)
    smdistributed: SmDistributedConfig = Field(default_factory=SmDistributedConfig)
    processes_per_host: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PROCESSES_PER_HOST,
        description="for any launcher; default: the instance type's GPUs, else 1",
    )
    oversubscribe: bool = Field(
        default=False, description="allow more processes per host than the type has cores"
    )


def launchers_enabled(config: DistributionConfig) -> list[str]:
    """The spec paths of every launcher switched on (more than one is an error)."""
    found = [name for name in LAUNCHER_FLAGS if getattr(config, name).enabled]
    if config.smdistributed.dataparallel.enabled:
        found.append("smdistributed.dataparallel")
    return found


def check_distribution(
    config: DistributionConfig, entry_point: str, instance: InstanceType, hosts: int
) -> DistributionConfig:
    """``config`` with ``processes_per_host`` resolved, or a ValueError naming what is wrong."""
    launchers = launchers_enabled(config)
    if len(launchers) > 1:
        raise ValueError(f"more than one launcher enabled ({', '.join(launchers)}); choose one")
    per_host = _processes_per_host(config, instance)
    if config.parameter_server.enabled and per_host > 1:
        raise ValueError(
            f"parameter_server runs one script per host (and a parameter server beside it); "
            f"processes_per_host is {per_host}, must be 1"
        )
    if config.torch_distributed.enabled and not entry_point.endswith(".py"):
        raise ValueError(
            f"torch_distributed: torchrun runs Python scripts only, and entry_point "
            f"{entry_point!r} is not a .py file"
        )
    _check_model_parallel(config.smdistributed.modelparallel, hosts, per_host)
    return config.model_copy(update={"processes_per_host": per_host})


def _processes_per_host(config: DistributionConfig, instance: InstanceType) -> int:
    explicit = {n for n in (config.processes_per_host, config.mpi.processes_per_host) if n}
    if len(explicit) > 1:
        raise ValueError(
            f"processes_per_host ({config.processes_per_host}) and mpi.processes_per_host "
            f"({config.mpi.processes_per_host}) disagree; give one"
        )
    per_host = explicit.pop() if explicit else (instance.gpus or 1)
    limit, what = (instance.gpus, "GPUs") if instance.gpus else (instance.vcpus, "vCPUs")
    if per_host > limit and not config.oversubscribe:
        raise ValueError(
            f"processes_per_host: {per_host} processes on {instance.name}, which has {limit} "
            f"{what}; set distribution.oversubscribe: true to run them anyway"
        )
    return per_host


def _check_model_parallel(config: ModelParallelConfig, hosts: int, per_host: int) -> None:
    if not config.enabled:
        return
    world = hosts * per_host
    pipeline, tensor = config.pipeline_degree, config.degree("tensor_parallel_degree")
    where = f"the world size {world} ({hosts} hosts x {per_host} processes)"
    if world % (pipeline * tensor):
        raise ValueError(
            f"smdistributed.modelparallel.parameters: pipeline_parallel_degree {pipeline} x "
            f"tensor_parallel_degree {tensor} does not divide {where}"
        )
    data_parallel = world // (pipeline * tensor)
    sharded = config.degree("sharded_data_parallel_degree")
    if data_parallel % sharded:
        raise ValueError(
            f"smdistributed.modelparallel.parameters: sharded_data_parallel_degree {sharded} "
            f"does not divide the data-parallel degree {data_parallel} ({where} / pipeline "
            f"{pipeline} / tensor {tensor})"
        )
