"""Refinement steps: late in a GP search, some trials go to the model's best guess near the
incumbent instead of to its expected-improvement maximum.

On a refinement turn (:func:`is_refine_turn`: from trial :data:`REFINE_FROM`, one trial in
:data:`REFINE_EVERY`) the Bayesian GP sampler fits its model as on any turn, then fits a
second, local one to the trials nearest the best so far (the :func:`local_count` nearest in the
first model's length scales, their values standardized among themselves), climbs the local
model's posterior mean from the best trial (gradient ascent, the optimizer Optuna runs on its
acquisition) and proposes the point where the climb ends: the predicted optimum of the
incumbent's basin, the continuous analogue of the tables' local steps (trainops.tuning._local).
Expected improvement keeps exploring on the other turns. When the climb ends on a trial (it
did not move: the model predicts nothing better nearby; or a refinement step still running is
there) the trial is the acquisition's maximum, as on any turn.

Why a local model: the global one standardizes the values over the whole space and has a noise
floor (Optuna's minimum noise variance, 1e-6 of that spread, or more as fitted), so it cannot
tell apart points whose values differ by less than about a thousandth of the spread; near an
optimum the differences are that small. Standardized over the basin's points only, they are not.

The step is a function of the study's trials and the sampler's seed alone (both fits are), so a
search rebuilt from the same records proposes the same step. It uses Optuna's private GP modules
(``optuna._gp``), as ``GPSampler._optimize_acqf``'s documentation invites a subclass to.
"""

from __future__ import annotations

from typing import Any

__all__ = ["REFINE_EVERY", "REFINE_FROM", "is_refine_turn", "local_count", "refining_gp_sampler"]

REFINE_FROM = 30  # trials before the first refinement step
REFINE_EVERY = 2  # from then on, one trial in REFINE_EVERY is a refinement step
_MIN_MOVE = 1e-6  # a climb ending nearer a trial than this (normalized units) ends on it


def is_refine_turn(number: int) -> bool:
    """Whether trial ``number`` is a refinement step's turn."""
    return number >= REFINE_FROM and (number - REFINE_FROM) % REFINE_EVERY == 0


def local_count(trials: int, dimensions: int) -> int:
    """How many of ``trials`` the local model is fitted to over ``dimensions`` ranges."""
    return min(trials, 4 * dimensions + 5)


def refining_gp_sampler(**kwargs: Any) -> Any:
    """An Optuna ``GPSampler`` (made with ``kwargs``) whose proposal is the local posterior
    mean's maximum climbed to from the incumbent."""
    import numpy as np
    import torch
    from optuna._gp import acqf as acqf_module
    from optuna._gp import gp as gp_module
    from optuna._gp import optim_mixed
    from optuna.samplers import GPSampler

    class _PosteriorMean(acqf_module.BaseAcquisitionFunc):
        def __init__(self, gpr: Any, search_space: Any) -> None:
            self._gpr = gpr
            super().__init__(gpr.length_scales, search_space)

        def eval_acqf(self, x: torch.Tensor) -> torch.Tensor:
            mean: torch.Tensor = self._gpr.posterior(x)[0]
            return mean

    class _RefiningGPSampler(GPSampler):
        def _optimize_acqf(self, acqf: Any, best_params: Any) -> Any:
            # LogEI holds the GP fitted to the completed trials; qLogEI (trials running) holds
            # it in its conditional GP, with the running trials' points
            conditional = getattr(acqf, "_cond_gpr", None)
            gpr = getattr(conditional or acqf, "_gpr", None)
            if gpr is None or best_params is None or len(best_params) != 1:
                return super()._optimize_acqf(acqf, best_params)
            mean = _PosteriorMean(self._local_gpr(gpr), acqf.search_space)
            xs, _ = optim_mixed.local_search_mixed_batched(mean, best_params.copy(), tol=self._tol)
            known = gpr._X_train.detach().numpy()
            if conditional is not None:
                known = np.vstack([known, conditional._X_running.detach().numpy()])
            if float(np.min(np.max(np.abs(known - xs[0]), axis=1))) < _MIN_MOVE:
                return super()._optimize_acqf(acqf, best_params)
            return xs[0]

        def _local_gpr(self, gpr: Any) -> Any:
            """A GP fitted to the trials nearest the best one, standardized among them."""
            X = gpr._X_train.detach().numpy()
            y = gpr._y_train.squeeze(-1).detach().numpy()  # standardized, higher is better
            best = X[int(np.argmax(y))]
            distance = (((X - best) / gpr.length_scales) ** 2).sum(axis=1)
            nearest = np.argsort(distance, kind="stable")[: local_count(*X.shape)]
            local = y[nearest]
            local = (local - local.mean()) / max(float(local.std()), 1e-12)
            return gp_module.fit_kernel_params(
                X=X[nearest].copy(),
                Y=local,
                is_categorical=gpr._is_categorical.numpy(),
                log_prior=self._log_prior,
                minimum_noise=self._minimum_noise,
                deterministic_objective=self._deterministic,
            )

    return _RefiningGPSampler(**kwargs)
