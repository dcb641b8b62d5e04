"""A tuning job's analysis: its figures computed as data, then drawn (PNG) and written (HTML).

:func:`analyse` turns each trial's :class:`TrialFacts` (gathered from the store by the tuner)
into a :class:`TuningAnalysis`: the objective per trial with the best so far, one slice per
tuned parameter, parameter importance, each trial's cost and the total, and the compute early
stopping saved. :func:`plot_pngs` and :func:`render_html` draw it; :func:`write_report` writes
the PNGs, the page and the data (``analysis.json``, what the web UI reads) into a folder.
matplotlib (the ``plot`` extra) is imported only to draw.
"""

from trainops.tuning.analysis._data import (
    IMPORTANCE_METHOD,
    EarlyStoppingSavings,
    Slice,
    SlicePoint,
    TrialPoint,
    TuningAnalysis,
    analyse,
    step_budget,
)
from trainops.tuning.analysis._facts import TrialFacts
from trainops.tuning.analysis._html import render_html, write_report
from trainops.tuning.analysis._importance import Importance, explained_share
from trainops.tuning.analysis._plots import PLOT_NAMES, plot_pngs

__all__ = [
    "IMPORTANCE_METHOD",
    "PLOT_NAMES",
    "EarlyStoppingSavings",
    "Importance",
    "Slice",
    "SlicePoint",
    "TrialFacts",
    "TrialPoint",
    "TuningAnalysis",
    "analyse",
    "explained_share",
    "plot_pngs",
    "render_html",
    "step_budget",
    "write_report",
]
