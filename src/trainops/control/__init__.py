"""The control plane's job state machine: scheduling, lifecycle, stop, timeout, retry, recovery.

:class:`JobController` is the entry point; the server calls it for every public and agent
request. Statuses follow SageMaker's (primary and secondary) and every secondary transition is
recorded with its start, end and message.
"""

from trainops.control._controller import JobController
from trainops.control._core import ControllerConfig
from trainops.control._merge import merge_parts
from trainops.control._status import (
    ENDED,
    AgentAuthError,
    JobEndedError,
    PrimaryStatus,
    SecondaryStatus,
    StopReason,
)

__all__ = [
    "ENDED",
    "AgentAuthError",
    "ControllerConfig",
    "JobController",
    "JobEndedError",
    "PrimaryStatus",
    "SecondaryStatus",
    "StopReason",
    "merge_parts",
]
