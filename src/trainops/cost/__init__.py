"""Analysis of what jobs cost and how they scale (reads results; runs nothing).

The scaling study's figures live here; the command that runs the study's jobs is
``trainops study`` (``cli``).
"""

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
    "StudyRow",
    "StudyRun",
    "plot_study",
    "render_study",
    "scaling_rows",
    "throughput_of",
    "time_to_target",
]
