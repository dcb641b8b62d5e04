"""The built-in pages of the web UI, registered in :data:`~trainops.server.ui.PAGES` in the order
the navigation bar lists them. A new page is a module here and a line below
(docs/internals/ui-pages.md)."""

from __future__ import annotations

from trainops.server.ui._page import PAGES
from trainops.server.ui.pages._cluster import CLUSTER_PAGE
from trainops.server.ui.pages._job import JOB_PAGE
from trainops.server.ui.pages._jobs import JOBS_PAGE
from trainops.server.ui.pages._studies import STUDIES_PAGE, STUDY_PAGE
from trainops.server.ui.pages._tuning import TUNING_JOBS_PAGE, TUNING_PAGE

__all__ = [
    "CLUSTER_PAGE",
    "JOBS_PAGE",
    "JOB_PAGE",
    "STUDIES_PAGE",
    "STUDY_PAGE",
    "TUNING_JOBS_PAGE",
    "TUNING_PAGE",
]

PAGES.register("jobs", JOBS_PAGE)
PAGES.register("job", JOB_PAGE)
PAGES.register("tuning-jobs", TUNING_JOBS_PAGE)
PAGES.register("tuning", TUNING_PAGE)
PAGES.register("studies", STUDIES_PAGE)
PAGES.register("study", STUDY_PAGE)
PAGES.register("cluster", CLUSTER_PAGE)
