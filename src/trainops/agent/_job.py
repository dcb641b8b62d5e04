"""The parts of an assigned job spec the agent acts on, read from the spec's JSON form.

The control plane validated the spec before it assigned it, so the agent reads the plain JSON
(``JobSpec.model_dump(mode="json")``) into small frozen records instead of importing pydantic:
an agent that imports little starts fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["AssignedChannel", "AssignedJob", "MetricPattern"]

DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"
SHARDED = "ShardedByKey"


@dataclass(frozen=True, slots=True)
class AssignedChannel:
    """One File-mode input channel."""

    name: str
    uri: str
    content_type: str | None = None
    distribution: str = "FullyReplicated"
    shuffle_seed: int | None = None

    @property
    def sharded(self) -> bool:
        return self.distribution == SHARDED


@dataclass(frozen=True, slots=True)
class MetricPattern:
    """A metric definition: the first capture group of ``regex`` is the value."""

    name: str
    regex: str


@dataclass(frozen=True, slots=True)
class AssignedJob:
    """What one host needs from the job spec."""

    entry_point: str
    instance_type: str
    hyperparameters: dict[str, Any]
    environment: dict[str, str]
    channels: tuple[AssignedChannel, ...] = ()
    checkpoint_uri: str | None = None
    checkpoint_local_path: str = DEFAULT_CHECKPOINT_PATH
    metrics: tuple[MetricPattern, ...] = ()
    grace_seconds: float = 120.0

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> AssignedJob:
        checkpoint = spec.get("checkpoint") or {}
        stopping = spec.get("stopping_condition") or {}
        return cls(
            entry_point=str(spec["entry_point"]),
            instance_type=str(spec.get("instance_type") or "ml.m5.large"),
            hyperparameters=dict(spec.get("hyperparameters") or {}),
            environment={str(k): str(v) for k, v in (spec.get("environment") or {}).items()},
            channels=tuple(_channel(name, raw) for name, raw in (spec.get("inputs") or {}).items()),
            checkpoint_uri=checkpoint.get("uri"),
            checkpoint_local_path=checkpoint.get("local_path") or DEFAULT_CHECKPOINT_PATH,
            metrics=tuple(
                MetricPattern(str(m["name"]), str(m["regex"]))
                for m in spec.get("metric_definitions") or []
            ),
            grace_seconds=float(stopping.get("grace_period_in_seconds", 120)),
        )


def _channel(name: str, raw: dict[str, Any]) -> AssignedChannel:
    seed = raw.get("shuffle_seed")
    return AssignedChannel(
        name=name,
        uri=str(raw["uri"]),
        content_type=raw.get("content_type"),
        distribution=str(raw.get("distribution") or "FullyReplicated"),
        shuffle_seed=None if seed is None else int(seed),
    )
