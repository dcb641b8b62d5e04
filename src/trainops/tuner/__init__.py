"""The tuner: the control-plane service that runs hyperparameter tuning jobs, and their views.

A tuning job's trials are ordinary training jobs; the store's ``tuning_jobs`` and
``tuning_trials`` rows are the tuner's only state (see ``_service``). Importing this package
registers the ``tuner`` control-plane service. The config, the search and its strategies are
the tuning library's (``trainops.tuning``); ``_records`` converts between its records and the
store's rows.
"""

from __future__ import annotations

from trainops.control.services import SERVICES, register_service
from trainops.tuner._describe import (
    best_trial,
    describe_tuning_job,
    trial_summary,
    tuning_summary,
)
from trainops.tuner._records import MAX_TRIES, search_for, stored_config, trial_record
from trainops.tuner._service import TunerService, trial_job_name, trial_spec, tuner_service

__all__ = [
    "MAX_TRIES",
    "TunerService",
    "best_trial",
    "describe_tuning_job",
    "search_for",
    "stored_config",
    "trial_job_name",
    "trial_record",
    "trial_spec",
    "trial_summary",
    "tuner_service",
    "tuning_summary",
]

if "tuner" not in SERVICES:
    register_service("tuner", tuner_service)
