"""The tuner: the control-plane service that runs hyperparameter tuning jobs, and their views.

A tuning job's trials are ordinary training jobs; the store's ``tuning_jobs`` and
``tuning_trials`` rows are the tuner's only state (see ``_service``). Importing this package
registers the ``tuner`` control-plane service as a light hook (``_hook``) that loads the tuner
once a tuning job exists. The config, the search and its strategies are the tuning library's
(``trainops.tuning``); ``_analysis`` gathers a job's trials for its analysis (cost, early
stopping; ``trainops.tuning.analysis``); ``_records`` converts between its records and the store's rows. Names are
imported on first use, so a control plane without tuning jobs never imports that library.
"""

from __future__ import annotations

import typing

from trainops._lazy import lazy_names
from trainops.control.services import SERVICES, register_service
from trainops.tuner._hook import TunerHook, tuner_hook

if typing.TYPE_CHECKING:
    from trainops.tuner._analysis import EARLY_STOP_PREFIX, analyse_tuning_job
    from trainops.tuner._describe import (
        best_trial,
        describe_tuning_job,
        status_counters,
        training_status,
        trial_summary,
        tuning_summary,
    )
    from trainops.tuner._records import MAX_TRIES, search_for, stored_config, trial_record
    from trainops.tuner._service import TunerService, trial_job_name, trial_spec, tuner_service

__all__ = [
    "EARLY_STOP_PREFIX",
    "MAX_TRIES",
    "TunerHook",
    "TunerService",
    "analyse_tuning_job",
    "best_trial",
    "describe_tuning_job",
    "search_for",
    "status_counters",
    "stored_config",
    "training_status",
    "trial_job_name",
    "trial_record",
    "trial_spec",
    "trial_summary",
    "tuner_hook",
    "tuner_service",
    "tuning_summary",
]

_MODULE_OF = {
    **dict.fromkeys(["EARLY_STOP_PREFIX", "analyse_tuning_job"], "trainops.tuner._analysis"),
    **dict.fromkeys(
        [
            "best_trial",
            "describe_tuning_job",
            "status_counters",
            "trial_summary",
            "training_status",
            "tuning_summary",
        ],
        "trainops.tuner._describe",
    ),
    **dict.fromkeys(
        ["MAX_TRIES", "search_for", "stored_config", "trial_record"], "trainops.tuner._records"
    ),
    **dict.fromkeys(
        ["TunerService", "trial_job_name", "trial_spec", "tuner_service"],
        "trainops.tuner._service",
    ),
}

__getattr__, __dir__ = lazy_names("trainops.tuner", globals(), _MODULE_OF)

if "tuner" not in SERVICES:
    register_service("tuner", tuner_hook)
