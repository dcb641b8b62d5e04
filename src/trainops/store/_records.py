"""Immutable snapshots of the rows the store hands out, and how they are read from SQLite rows.

Callers never hold a live row: every read returns frozen records, so a snapshot taken under one
lock stays consistent while the store moves on.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from trainops._errors import TrainopsError
from trainops.protocol import SubmittedJob

__all__ = [
    "AgentCredential",
    "ArtifactRecord",
    "EventLike",
    "HostRecord",
    "HostState",
    "IngestResult",
    "JobExistsError",
    "JobRecord",
    "LogChunk",
    "LogLine",
    "MetricPoint",
    "NewHost",
    "RuleEvaluation",
    "Transition",
]


class JobExistsError(TrainopsError):
    """A job with that name is already in the store."""


class HostState(StrEnum):
    """Where one host agent of one attempt is in its life."""

    LAUNCHING = "Launching"  # the record exists, the agent process is being started
    RUNNING = "Running"
    EXITED = "Exited"  # ``outcome`` says how


class EventLike(Protocol):
    """What the store needs of an agent event (``trainops.protocol.AgentEvent`` fits)."""

    @property
    def seq(self) -> int: ...
    @property
    def ts(self) -> float: ...
    @property
    def kind(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class JobRecord:
    name: str
    spec: SubmittedJob
    status: str
    secondary_status: str
    failure_reason: str | None
    creation_time: float
    training_start_time: float | None
    training_end_time: float | None
    last_modified_time: float
    attempt: int
    max_attempts: int
    code_uri: str
    output_prefix: str
    stop_reason: str | None
    stop_requested_at: float | None
    billable_seconds: int | None
    training_seconds: int | None
    order: int
    # Managed spot (see migration 0013): interruptions so far, the notice and capacity gap of
    # the one under way, when its capacity wait ends, when this attempt entered Training, the
    # running seconds of earlier (interrupted) attempts, and chaos interruptions played.
    interruptions: int = 0
    spot_notice: float | None = None
    spot_gap: float | None = None
    capacity_wait_until: float | None = None
    attempt_training_start: float | None = None
    billable_accrued: float = 0.0
    chaos_done: int = 0

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JobRecord:
        data = dict(zip(row.keys(), row, strict=True))
        spec, order = _spec_of(data.pop("spec")), data.pop("id")
        data.pop("agent_token_hash", None)  # unused since schema version 11 (see HostRecord)
        return cls(spec=spec, order=order, **data)


@functools.lru_cache(maxsize=1024)
def _spec_of(text: str) -> SubmittedJob:
    """A stored spec, parsed once per text (it is never changed once stored; a frozen record
    that no caller changes, so one parse is shared). The monitor's tick and every agent report
    read a running job's record: parsing its spec was most of what they cost. Room for 1024:
    each trial of a tuning job has a spec of its own (its hyperparameters), and describing a
    500-trial tuning job reads every trial's job; with room for 128 every read missed (~0.5 ms
    a parse)."""
    return SubmittedJob.from_json(json.loads(text))


@dataclass(frozen=True, slots=True)
class Transition:
    status: str
    start_time: float
    end_time: float | None
    message: str


@dataclass(frozen=True, slots=True)
class NewHost:
    """A host record about to be created for one attempt."""

    host: str
    root: str
    state_dir: str
    resources: dict[str, Any] = field(default_factory=dict)
    reservation: dict[str, Any] = field(default_factory=dict)
    token_hash: str | None = None  # SHA-256 of the host's own agent token


@dataclass(frozen=True, slots=True)
class AgentCredential:
    """What an agent's request is checked against: its host's token hash (``None`` once
    revoked) and state, and its job's status and current attempt."""

    token_hash: str | None = field(repr=False)
    state: str
    attempt: int
    status: str
    job_attempt: int


@dataclass(frozen=True, slots=True)
class HostRecord:
    job: str
    host: str
    attempt: int
    state: str
    handle: dict[str, Any] | None  # the backend's handle of the host's agent (opaque JSON)
    node: str | None  # the machine the agent ran on, as the backend names it
    root: str
    state_dir: str
    acked_seq: int
    phase: str | None
    outcome: str | None
    exit_code: int | None
    failure_reason: str | None
    exit_time: float | None
    resources: dict[str, Any]
    reservation: dict[str, Any]
    processes: list[dict[str, Any]]
    ranks: list[dict[str, Any]]  # [{"rank": r, "exit_code": c}] of a host running several ranks
    # SHA-256 of the host's agent token (one per host and attempt); None once the host or its
    # job has ended: the token is revoked.
    token_hash: str | None = field(default=None, repr=False)

    @property
    def exited(self) -> bool:
        return self.state == HostState.EXITED

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> HostRecord:
        data = dict(zip(row.keys(), row, strict=True))
        for key in ("resources", "reservation", "processes", "ranks"):
            data[key] = json.loads(data[key])
        # Before schema version 6 the local backend's handle had columns of its own.
        pid, created = data.pop("pid", None), data.pop("process_create_time", None)
        raw = data.get("handle")
        legacy = {"pid": pid, "create_time": created} if pid is not None else None
        data["handle"] = json.loads(raw) if raw else legacy
        return cls(**data)


@dataclass(frozen=True, slots=True)
class LogLine:
    cursor: int
    host: str
    attempt: int
    ts: float
    stream: str
    line: str
    rank: int | None = None  # the rank that wrote it, where its host ran several


@dataclass(frozen=True, slots=True)
class LogChunk:
    """Consecutive log lines of one event: cursors ``first``, ``first + 1``, …, one each."""

    first: int
    host: str
    attempt: int
    ts: float
    stream: str
    rank: int | None
    lines: list[str]


@dataclass(frozen=True, slots=True)
class MetricPoint:
    name: str
    value: float
    ts: float
    host: str


@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    name: str
    host: str
    uri: str


@dataclass(frozen=True, slots=True)
class IngestResult:
    """``acked_seq``: the highest event number stored; ``accepted``: events new in this call."""

    acked_seq: int
    accepted: list[EventLike]


@dataclass(frozen=True, slots=True)
class RuleEvaluation:
    """Where one rule of a job stands (SageMaker's ``RuleEvaluationStatus``) and its result
    (evidence, recommendation, what each action did) as JSON."""

    job: str
    name: str
    rule: str
    kind: str
    status: str
    status_details: str
    last_modified_time: float
    result: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RuleEvaluation:
        return cls(
            row["job"],
            row["name"],
            row["rule"],
            row["kind"],
            row["status"],
            row["status_details"],
            row["last_modified_time"],
            json.loads(row["result"]),
        )
