"""The metadata store: jobs, transitions, hosts, logs, metrics, artifacts,
checkpoint records, tuning jobs, the SageMaker API's tags and kept requests, and scaling studies
in SQLite.

Owned by the control plane (agents never open it). The schema is versioned: numbered SQL files
in ``migrations/`` are applied in order when a database is opened, and a database written by a
newer trainops is refused with :class:`SchemaVersionError`.
"""

from trainops.protocol import CHECKPOINT_KINDS, CheckpointKind, CheckpointRecord
from trainops.store._commits import COMMIT_TOPICS, CommitSignal
from trainops.store._log_streams import LogPosition, LogStreamStats, StreamLine
from trainops.store._records import (
    AgentCredential,
    ArtifactRecord,
    EventLike,
    HostRecord,
    HostState,
    IngestResult,
    JobExistsError,
    JobRecord,
    LogChunk,
    LogLine,
    MetricPoint,
    NewHost,
    RuleEvaluation,
    Transition,
)
from trainops.store._schema import Migration, SchemaVersionError, apply_migrations, load_migrations
from trainops.store._series import SeriesBucket
from trainops.store._store import JOB_ORDERS, MetadataStore
from trainops.store._studies import STUDY_STATUSES, StudyRecord, StudyRowRecord
from trainops.store._tags import TAGGED_KINDS, TagLimitError
from trainops.store._tuning import (
    TRIAL_ENDED,
    TrialExistsError,
    TuningJobExistsError,
    TuningJobRecord,
    TuningTrialRecord,
)

__all__ = [
    "CHECKPOINT_KINDS",
    "COMMIT_TOPICS",
    "JOB_ORDERS",
    "STUDY_STATUSES",
    "TAGGED_KINDS",
    "TRIAL_ENDED",
    "AgentCredential",
    "ArtifactRecord",
    "CheckpointKind",
    "CheckpointRecord",
    "CommitSignal",
    "EventLike",
    "HostRecord",
    "HostState",
    "IngestResult",
    "JobExistsError",
    "JobRecord",
    "LogChunk",
    "LogLine",
    "LogPosition",
    "LogStreamStats",
    "MetadataStore",
    "MetricPoint",
    "Migration",
    "NewHost",
    "RuleEvaluation",
    "SchemaVersionError",
    "SeriesBucket",
    "StreamLine",
    "StudyRecord",
    "StudyRowRecord",
    "TagLimitError",
    "Transition",
    "TrialExistsError",
    "TuningJobExistsError",
    "TuningJobRecord",
    "TuningTrialRecord",
    "apply_migrations",
    "load_migrations",
]
