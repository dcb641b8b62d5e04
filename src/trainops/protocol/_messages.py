"""Messages of the narrow agent API: what a host agent is told, and what it reports.

The agent fetches an :class:`Assignment`, then posts batches of :class:`AgentEvent` (each with a
per-host, per-attempt sequence number, so a resend after a lost reply is harmless) and receives
an :class:`EventReply` with the highest sequence number the control plane has stored and any
:class:`Command` for it (stop, or spawn: a command another host of the job asked this host to run,
see :class:`SpawnState`). Plain dataclasses and JSON keep the agent's imports light.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from trainops.protocol._job import SubmittedJob

__all__ = [
    "AGENT_API_PREFIX",
    "RESERVED_HYPERPARAMETERS",
    "AgentEvent",
    "Assignment",
    "Command",
    "EventKind",
    "EventReply",
    "HostOutcome",
    "HostResources",
    "Phase",
    "SpawnState",
    "event_span",
    "sdk_unwrapped",
    "toolkit_value",
]

AGENT_API_PREFIX = "/agent/v1"

# The SageMaker toolkit's reserved hyperparameters (params.SAGEMAKER_HYPERPARAMETERS): set by the
# platform from the job spec, never by a user, and left out of SM_HPS and the script's arguments.
RESERVED_HYPERPARAMETERS = frozenset(
    {
        "sagemaker_program",
        "sagemaker_submit_directory",
        "sagemaker_enable_cloudwatch_metrics",
        "sagemaker_region",
        "sagemaker_container_log_level",
        "sagemaker_job_name",
        "default_user_module_name",
        "_tuning_objective_metric",
        "sagemaker_s3_output",
    }
)


#: A hyperparameter's JSON nests at most this deep to be read as JSON (a list of lists is
#: plenty; ``[`` repeated 2,500 times, the API's longest value, would exhaust the decoder's
#: recursion): deeper, it stays text.
MAX_HYPERPARAMETER_NESTING = 32


def toolkit_value(text: str) -> Any:
    """A hyperparameter's text as the training toolkit reads it into ``SM_HPS`` and the
    script's arguments: JSON where it is JSON (``3`` is 3, ``"\\"adam\\""`` is ``adam``,
    ``true`` is True, ``[64, 32]`` a list), the text itself where it is not (``adam``). A JSON
    null or a non-finite number stays text: a job's hyperparameters carry neither."""
    if _nesting(text) > MAX_HYPERPARAMETER_NESTING:  # the decoder would recurse that deep
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return text
    return value


def _nesting(text: str) -> int:
    """How deep ``text``'s brackets nest outside its JSON strings, at most."""
    depth = deepest = 0
    quoted = escaped = False
    for char in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def sdk_unwrapped(value: str) -> str:
    """A hyperparameter value as the training toolkit hands it to the script: the SageMaker
    Python SDK JSON-encodes every value (``"adam"`` is sent as ``"\\"adam\\""``), and a value
    that is a JSON string is read back as that string; any other value is kept as it is."""
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        if isinstance(decoded, str):
            return decoded
    return value


class EventKind(StrEnum):
    """What an event carries; ``data`` keys per kind are listed on each member."""

    PHASE = "phase"  # {"phase": Phase, "message": str}
    # {"stream": "stdout" | "stderr" | "agent", "line": str}, or many lines in one event:
    # {"stream": ..., "lines": [str, ...]}, which spans len(lines) sequence numbers.
    LOG = "log"
    # {"name": str, "value": float, "timestamp": float}, or many points of one metric taken
    # at one time: {"name": ..., "timestamp": ..., "values": [float, ...]}, which spans
    # len(values) sequence numbers.
    METRIC = "metric"
    ARTIFACT = "artifact"  # {"name": "model" | "model_part" | "output" | "log" | ..., "uri": str}
    PROCESS = "process"  # {"pid": int, "pgid": int, "command": [str, ...]}
    EXIT = "exit"  # {"outcome": HostOutcome, "exit_code": int | None, "failure_reason": str | None}
    # How a rule's command action (``Command(kind="action")``) went on this host:
    # {"action_id": str, "ran": bool, "exit_code": int | None, "timed_out": bool,
    #  "output": str (the tail of its output), "error": str | None (why it did not run)}
    ACTION = "action"
    # A checkpoint sync's report (``trainops.store.CheckpointRecord`` less job, attempt, host):
    # {"kind": "synced" | "restored" | "sync_failed" | "sync_incomplete", "at": float,
    #  "files": int, "bytes": int, "newest_write": float | None, "write_seconds": float | None,
    #  "upload_seconds": float | None, "reason": str | None}
    CHECKPOINT = "checkpoint"


class Phase(StrEnum):
    """The secondary statuses a host passes through while it runs."""

    DOWNLOADING = "Downloading"
    TRAINING = "Training"
    UPLOADING = "Uploading"


class HostOutcome(StrEnum):
    """How one host ended. ``InternalError`` is trainops' fault and makes the job retryable."""

    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    INTERNAL_ERROR = "InternalError"


def event_span(kind: str, data: dict[str, Any]) -> int:
    """How many sequence numbers an event takes: one, or one per line (per value) of a batch.

    An event of ``n`` lines numbered ``seq`` stands for events ``seq`` … ``seq + n - 1``, one
    per line, so a log line keeps its own sequence number whether it travelled alone or not.
    """
    items = data.get("lines") if kind == "log" else data.get("values") if kind == "metric" else None
    return max(1, len(items)) if isinstance(items, list) else 1


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """One report from a host agent."""

    seq: int
    ts: float
    kind: EventKind
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "ts": self.ts, "kind": str(self.kind), "data": self.data}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> AgentEvent:
        return cls(
            seq=int(raw["seq"]),
            ts=float(raw["ts"]),
            kind=EventKind(raw["kind"]),
            data=dict(raw["data"]),
        )


@dataclass(frozen=True, slots=True)
class HostResources:
    """What the backend reserved for this host: CPU ids for affinity, GPU ids, memory.

    A backend that hands out no ids (the node's engine does, as Ray does its GPUs) says how
    many instead: ``cpu_count`` and ``gpu_count`` stand where ``cpus`` or ``gpus`` is empty.
    """

    cpus: list[int] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    memory_mb: int = 0
    cpu_count: int = 0
    gpu_count: int = 0

    @property
    def num_cpus(self) -> int:
        """CPUs of the host (0: unknown, the machine's)."""
        return len(self.cpus) or self.cpu_count

    @property
    def num_gpus(self) -> int:
        return len(self.gpus) or self.gpu_count


@dataclass(frozen=True, slots=True)
class Assignment:
    """Everything one host agent needs to run its part of a job.

    ``spec`` is the validated spec's typed view; ``output_prefix`` is
    ``<output_path>/<job_name>`` where model.tar.gz, output.tar.gz, intermediate files and logs go;
    ``code_uri`` is the sourcedir.tar.gz the client uploaded.
    """

    job_name: str
    attempt: int
    current_host: str
    hosts: list[str]
    spec: SubmittedJob
    code_uri: str
    output_prefix: str
    resources: HostResources
    region: str = "us-east-1"
    # Each host's machine address where hosts run on machines of their own (a multi-node
    # backend); empty: every host is on one machine and gets a loopback address of its own.
    host_addresses: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["spec"] = self.spec.to_json()
        data["resources"] = asdict(self.resources)
        data["hosts"] = list(self.hosts)
        return data

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Assignment:
        data = dict(raw)
        data["resources"] = HostResources(**data["resources"])
        data["spec"] = SubmittedJob.from_json(data["spec"])
        return cls(**data)


class SpawnState(StrEnum):
    """Where a remote command (``Command(kind="spawn")``) stands.

    Another host's agent asked for it (``pending``); this host's agent handed it to the host's
    keeper process (``started``); its first process ended (``exited``, with its exit code), or it
    could not be run (``failed``, with the reason)."""

    PENDING = "pending"
    STARTED = "started"
    EXITED = "exited"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Command:
    """An instruction for the agent. ``kind == "stop"``: SIGTERM, then SIGKILL after grace.
    ``kind == "spawn"``: run ``words`` (a remote shell's command line, one word per item) in
    this host's keeper and report it as ``spawn_id``; repeated until the agent reports it
    started, so the agent runs each ``spawn_id`` once. ``kind == "action"``: a rule's command
    action: run ``words`` (its argv, no shell) as the job's processes run, ``stdin`` on its
    standard input, ``variables`` added to the job's environment, for at most
    ``timeout_seconds``, and report an ``action`` event for ``action_id``; repeated until that
    event arrives, so the agent runs each ``action_id`` once. ``interrupted`` (a stop): a spot
    interruption, ``grace_seconds`` its notice; the agent runs the last checkpoint sync once
    the ranks are down."""

    kind: str
    reason: str = ""
    grace_seconds: float = 120.0
    spawn_id: str = ""
    words: list[str] = field(default_factory=list)
    action_id: str = ""
    stdin: str = ""
    variables: dict[str, str] = field(default_factory=dict)
    timeout_seconds: float = 0.0
    interrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class EventReply:
    """The control plane's answer to an event batch."""

    acked_seq: int
    commands: list[Command] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"acked_seq": self.acked_seq, "commands": [c.to_json() for c in self.commands]}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> EventReply:
        return cls(
            acked_seq=int(raw["acked_seq"]),
            commands=[Command(**c) for c in raw.get("commands", [])],
        )
