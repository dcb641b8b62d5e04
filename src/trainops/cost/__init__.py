"""Analysis of what jobs cost and how they scale (reads results; runs nothing).

A job's cost (``job_cost``) is its billable time at the catalog price of its instances. Its
cost advice (``spot_cost`` on records, ``job_spot_cost`` from a store) adds its spot cost
(``prices_of``: the catalog's estimate or the user's own figure), what each interruption cost
(``Interruption``: work lost since the last synced checkpoint, time to train again) and the
checkpoint interval that would cost least at an interruption rate (``IntervalAdvice``, Young and
Daly's ``young_daly_interval``).

The scaling study's figures live here (and ``choose_for_deadline``: its cheapest configuration
that meets a deadline, on-demand and at spot, scale-up against scale-out); the command that runs the study's jobs is
``trainops study`` (``cli``).
"""

from trainops.cost._deadline import (
    DeadlineChoice,
    DeadlineOption,
    choose_for_deadline,
    render_deadline,
)
from trainops.cost._interruptions import Interruption, billable_seconds, interruptions
from trainops.cost._interval import (
    IntervalAdvice,
    advise_interval,
    expected_overhead,
    young_daly_interval,
)
from trainops.cost._job import JobCost, job_cost
from trainops.cost._prices import Prices, prices_of
from trainops.cost._spot import SpotCost, job_spot_cost, spot_cost
from trainops.cost._study import (
    StudyRow,
    StudyRun,
    plot_study,
    render_study,
    scaling_rows,
    throughput_of,
    time_to_target,
)

__all__ = [
    "DeadlineChoice",
    "DeadlineOption",
    "Interruption",
    "IntervalAdvice",
    "JobCost",
    "Prices",
    "SpotCost",
    "StudyRow",
    "StudyRun",
    "advise_interval",
    "billable_seconds",
    "choose_for_deadline",
    "expected_overhead",
    "interruptions",
    "job_cost",
    "job_spot_cost",
    "plot_study",
    "prices_of",
    "render_deadline",
    "render_study",
    "scaling_rows",
    "spot_cost",
    "throughput_of",
    "time_to_target",
    "young_daly_interval",
]
