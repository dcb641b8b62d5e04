"""Analysis of what jobs cost and how they scale (reads results; runs nothing).

A job's cost (``job_cost``) is its billable time at the catalog price of its instances.

The scaling study's figures live here; the command that runs the study's jobs is
``trainops study`` (``cli``).
"""

from trainops.cost._job import JobCost, job_cost
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
    "JobCost",
    "StudyRow",
    "StudyRun",
    "job_cost",
    "plot_study",
    "render_study",
    "scaling_rows",
    "throughput_of",
    "time_to_target",
]
