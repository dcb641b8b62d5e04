"""Whether a tuning job may warm start from its parents (SageMaker's rules).

For both kinds: the same objective (metric and direction), the same number of static plus tuned
hyperparameters, no hyperparameter's type changed, at most 10 hyperparameters moved between
static and tuned. ``IdenticalDataAndAlgorithm`` also keeps the training data (the channels) and
the algorithm (entry point and source). Only the named parents' trials seed the job, not their
own parents'; whether each parent has ended is the tuner's to check (it knows their status).
"""

from __future__ import annotations

from collections.abc import Mapping

from trainops._errors import TUNING_JOB, SpecError
from trainops.tuning._config import TuningJobConfig
from trainops.tuning._limits import WarmStartType

__all__ = ["MAX_TUNED_STATIC_CHANGES", "check_warm_start"]

MAX_TUNED_STATIC_CHANGES = 10
Problems = list[tuple[str, str]]


def check_warm_start(config: TuningJobConfig, parents: Mapping[str, TuningJobConfig]) -> None:
    """Raise a :class:`SpecError` naming each parent ``config`` may not warm start from;
    ``parents`` maps each parent's name to its config (a name missing from it is refused)."""
    warm = config.warm_start_config
    if warm is None:
        return
    problems: Problems = []
    for index, name in enumerate(warm.parents):
        field = f"warm_start_config.parents.{index}"
        parent = parents.get(name)
        if parent is None:
            problems.append((field, f"no tuning job named {name!r}"))
            continue
        problems += [
            (field, f"{name}: {reason}")
            for reason in _differences(config, parent, warm.warm_start_type)
        ]
    if problems:
        raise SpecError(problems, subject=TUNING_JOB)


def _differences(
    config: TuningJobConfig, parent: TuningJobConfig, kind: WarmStartType
) -> list[str]:
    reasons = _objective(config, parent) + _hyperparameters(config, parent)
    if kind is WarmStartType.IDENTICAL_DATA_AND_ALGORITHM:
        reasons += _data_and_algorithm(config, parent)
    return reasons


def _objective(config: TuningJobConfig, parent: TuningJobConfig) -> list[str]:
    ours, theirs = config.objective, parent.objective
    if (ours.metric_name, ours.type) == (theirs.metric_name, theirs.type):
        return []
    return [
        f"its objective is {theirs.type.value} {theirs.metric_name}, not "
        f"{ours.type.value} {ours.metric_name}: a warm start keeps the objective"
    ]


def _names(config: TuningJobConfig) -> tuple[set[str], set[str]]:
    return set(config.hyperparameter_ranges), set(config.static_hyperparameters)


def _hyperparameters(config: TuningJobConfig, parent: TuningJobConfig) -> list[str]:
    tuned, static = _names(config)
    parent_tuned, parent_static = _names(parent)
    reasons = []
    if len(tuned) + len(static) != len(parent_tuned) + len(parent_static):
        reasons.append(
            f"it has {len(parent_tuned) + len(parent_static)} static and tuned "
            f"hyperparameters, this job {len(tuned) + len(static)}: a warm start keeps the count"
        )
    for name in sorted(tuned & parent_tuned):
        ours = config.hyperparameter_ranges[name].type
        theirs = parent.hyperparameter_ranges[name].type
        if ours is not theirs:
            reasons.append(f"{name} is {theirs.value} there, {ours.value} here: types must stay")
    moved = len(tuned & parent_static) + len(static & parent_tuned)
    if moved > MAX_TUNED_STATIC_CHANGES:
        reasons.append(
            f"{moved} hyperparameters moved between static and tuned; at most "
            f"{MAX_TUNED_STATIC_CHANGES}"
        )
    return reasons


def _data_and_algorithm(config: TuningJobConfig, parent: TuningJobConfig) -> list[str]:
    ours, theirs = config.training_job, parent.training_job
    reasons = []
    if ours.inputs != theirs.inputs:
        reasons.append("its training data (inputs) differ: use TransferLearning")
    if (ours.entry_point, ours.source_dir) != (theirs.entry_point, theirs.source_dir):
        reasons.append("its algorithm (entry_point, source_dir) differs: use TransferLearning")
    return reasons
