"""The client side of the public REST API: the HTTP client, connecting, submitting, following.

:func:`connect` gives a :class:`Client` to the configured server or to an embedded one;
:func:`submit_job` (a validated spec) and :func:`submit_spec` (a spec file's plain
data, validated by the server) pack and upload a spec's code and create the job; :func:`follow` streams a
job's log and status transitions until it ends. :func:`read_jobs` gives the reading commands a
:class:`JobReader`: a server's client, or with none running the home's store read directly
(:class:`StoreReader`); :func:`resolve_job_name` turns the start of a name or ``latest`` into a
job's whole name. :func:`submit_tuning` and :func:`read_tuning` do the same for tuning jobs.
"""

from trainops.client._connect import connect, running_server
from trainops.client._follow import TERMINAL_STATUSES, JobFollower, follow
from trainops.client._format import format_log_line, format_time, format_transition
from trainops.client._http import Client, JobNameTakenError, page_lines
from trainops.client._local import JobReader, StoreReader, read_jobs
from trainops.client._names import AmbiguousJobNameError, resolve_job_name
from trainops.client._progress import TransferBar
from trainops.client._submit import code_uri_for, pack_source, submit_job, submit_spec
from trainops.client._tuning import (
    ANALYTICS_COLUMNS,
    TuningReader,
    TuningStoreReader,
    analytics_rows,
    new_tuning_job_name,
    read_tuning,
    submit_tuning,
    submit_tuning_config,
)

__all__ = [
    "ANALYTICS_COLUMNS",
    "TERMINAL_STATUSES",
    "AmbiguousJobNameError",
    "Client",
    "JobFollower",
    "JobNameTakenError",
    "JobReader",
    "StoreReader",
    "TransferBar",
    "TuningReader",
    "TuningStoreReader",
    "analytics_rows",
    "code_uri_for",
    "connect",
    "follow",
    "format_log_line",
    "format_time",
    "format_transition",
    "new_tuning_job_name",
    "pack_source",
    "page_lines",
    "read_jobs",
    "read_tuning",
    "resolve_job_name",
    "running_server",
    "submit_job",
    "submit_spec",
    "submit_tuning",
    "submit_tuning_config",
]
