"""The tuner: the control-plane service that runs hyperparameter tuning jobs, and their views.

A tuning job's trials are ordinary training jobs; the store's ``tuning_jobs`` and
``tuning_trials`` rows are the tuner's only state (see ``_service``). Importing this package
registers the ``tuner`` control-plane service. Until the tuning library (``trainops.tuning``:
the declaration's models and the strategies) is wired in, ``_standin`` declares the fields the
tuner reads and proposes trials by seeded random search.
"""

from __future__ import annotations

from trainops.control.services import SERVICES, register_service
from trainops.tuner._describe import (
    best_trial,
    describe_tuning_job,
    trial_summary,
    tuning_summary,
)
from trainops.tuner._service import TunerService, trial_job_name, tuner_service
from trainops.tuner._standin import Proposal, RandomSearch, TrialView, TuningPlan, parse_plan

__all__ = [
    "Proposal",
    "RandomSearch",
    "TrialView",
    "TunerService",
    "TuningPlan",
    "best_trial",
    "describe_tuning_job",
    "parse_plan",
    "trial_job_name",
    "trial_summary",
    "tuner_service",
    "tuning_summary",
]

if "tuner" not in SERVICES:
    register_service("tuner", tuner_service)
