"""The control plane's job state machine: scheduling, lifecycle, stop, timeout, retry, recovery.

:class:`JobController` is the entry point; the server calls it for every public and agent
request. Statuses follow SageMaker's (primary and secondary) and every secondary transition is
recorded with its start, end and message.

Names are imported on first use, so that importing the package's settings (``_settings``,
which every process reads) does not import the rest of it.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names

if typing.TYPE_CHECKING:
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

_MODULE_OF = {
    "JobController": "trainops.control._controller",
    "ControllerConfig": "trainops.control._core",
    "merge_parts": "trainops.control._merge",
    "ENDED": "trainops.control._status",
    "AgentAuthError": "trainops.control._status",
    "JobEndedError": "trainops.control._status",
    "PrimaryStatus": "trainops.control._status",
    "SecondaryStatus": "trainops.control._status",
    "StopReason": "trainops.control._status",
}

__getattr__, __dir__ = lazy_names("trainops.control", globals(), _MODULE_OF)
