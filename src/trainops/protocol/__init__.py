"""The narrow agent API: messages between host agents and the control plane, and the launch contract.

Both sides import only this package from each other, so every backend (local processes, Ray
actors) starts and hears from agents the same way.
"""

from trainops.protocol._job import (
    DEFAULT_CHECKPOINT_PATH,
    ChannelSpec,
    CheckpointSpec,
    DataParallelSpec,
    DistributionSpec,
    EnabledSpec,
    MetricSpec,
    ModelParallelSpec,
    MpiSpec,
    RetrySpec,
    SmDistributedSpec,
    SpecViewError,
    StoppingSpec,
    SubmittedJob,
)
from trainops.protocol._launch import PARENT_ENV, STANDBY_ENV, AgentLaunch, agent_command
from trainops.protocol._messages import (
    AGENT_API_PREFIX,
    RESERVED_HYPERPARAMETERS,
    AgentEvent,
    Assignment,
    Command,
    EventKind,
    EventReply,
    HostOutcome,
    HostResources,
    Phase,
    SpawnState,
    event_span,
)
from trainops.protocol._observe import (
    ActionSpec,
    FrameworkProfileSpec,
    ProfilerSpec,
    ProfilingWindow,
    RuleSpec,
    TensorBoardSpec,
)

__all__ = [
    "AGENT_API_PREFIX",
    "DEFAULT_CHECKPOINT_PATH",
    "PARENT_ENV",
    "RESERVED_HYPERPARAMETERS",
    "STANDBY_ENV",
    "ActionSpec",
    "AgentEvent",
    "AgentLaunch",
    "Assignment",
    "ChannelSpec",
    "CheckpointSpec",
    "Command",
    "DataParallelSpec",
    "DistributionSpec",
    "EnabledSpec",
    "EventKind",
    "EventReply",
    "FrameworkProfileSpec",
    "HostOutcome",
    "HostResources",
    "MetricSpec",
    "ModelParallelSpec",
    "MpiSpec",
    "Phase",
    "ProfilerSpec",
    "ProfilingWindow",
    "RetrySpec",
    "RuleSpec",
    "SmDistributedSpec",
    "SpawnState",
    "SpecViewError",
    "StoppingSpec",
    "SubmittedJob",
    "TensorBoardSpec",
    "agent_command",
    "event_span",
]
