"""Local steps: a trial one move away from the best trial so far, on a finite space.

Past its first :data:`LOCAL_FROM` trials, every trial of a Bayesian search whose ranges are
all Integer or Categorical (TPE's) is a neighbour of the incumbent instead of a model proposal
while the incumbent has one not tried yet: the best completed trial with one range changed, an
Integer by one step up or down, a Categorical to another of its values, chosen at random among
the neighbours not tried yet. When every neighbour of the incumbent has been tried (a local
optimum), TPE proposes, until one of its trials becomes the new incumbent. So the search is a
hill climb from the model's best, restarted by the model: TPE models each range's good values
but proposes from its whole density; on the tables of bench/tuning_quality.py a run's last
gains come from single changes to the best configuration, which a local step tries directly.

A step is a function of the study's completed trials and a seed alone, so a search rebuilt
from the same records proposes the same step.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

__all__ = ["LOCAL_FROM", "is_local_turn", "local_step", "neighbours"]

LOCAL_FROM = 25  # trials before the first local step: the model's 10 startup and 15 of its own


def is_local_turn(number: int) -> bool:
    """Whether trial ``number`` is a local step's turn (the sampler proposes instead when the
    incumbent has no neighbour left to try)."""
    return number >= LOCAL_FROM


def neighbours(distributions: Mapping[str, Any], params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every point one move from ``params`` over the Optuna ``distributions`` (Integer and
    Categorical only), in the ranges' order."""
    out: list[dict[str, Any]] = []
    for name, dist in distributions.items():
        value = params[name]
        choices = getattr(dist, "choices", None)
        if choices is not None:
            moves = [choice for choice in choices if choice != value]
        else:
            moves = [v for v in (value - 1, value + 1) if dist.low <= v <= dist.high]
        out.extend({**params, name: move} for move in moves)
    return out


def local_step(
    study: Any,
    distributions: Mapping[str, Any],
    taken: Container[tuple[tuple[str, Any], ...]],
    seed: int,
) -> dict[str, Any] | None:
    """A neighbour of ``study``'s best completed trial not in ``taken`` (configurations as
    sorted items), drawn with ``seed``; ``None`` when no trial has completed or every
    neighbour has been tried."""
    import numpy as np
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    done = [trial for trial in complete if set(distributions) <= set(trial.params)]
    if not done:  # (a warm-start prior may lack a range)
        return None
    sign = -1.0 if study.direction is optuna.study.StudyDirection.MAXIMIZE else 1.0
    best = min(done, key=lambda trial: sign * float(trial.value))  # ties: the earliest
    fresh = [
        point
        for point in neighbours(distributions, best.params)
        if tuple(sorted(point.items())) not in taken
    ]
    if not fresh:
        return None
    return fresh[np.random.RandomState(seed).randint(len(fresh))]
