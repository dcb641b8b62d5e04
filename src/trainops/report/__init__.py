"""The profiler report: a job's profiler data, rule results and right-sizing advice, as data
(JSON) and as one self-contained HTML page.

``report_data`` computes the plain dict (the web UI and ``trainops report --json`` read it);
``render_html`` draws the page from it; ``job_report`` builds it from the store and the job's
profiler prefix. Importing this package registers the ``profiler-report`` control-plane service,
which writes the report when a job with the ProfilerReport rule ends.
"""

from __future__ import annotations

from trainops.control.services import SERVICES
from trainops.report._build import (
    REPORT_HTML,
    REPORT_JSON,
    NoProfilerDataError,
    job_profiler_prefix,
    job_report,
    report_prefix,
    write_report,
)
from trainops.report._data import REPORT_VERSION, SECTIONS, report_data
from trainops.report._html import REPORT_CSP, render_html, report_json
from trainops.report._service import (
    SERVICE_NAME,
    ProfilerReportService,
    profiler_report_service,
)

__all__ = [
    "REPORT_CSP",
    "REPORT_HTML",
    "REPORT_JSON",
    "REPORT_VERSION",
    "SECTIONS",
    "SERVICE_NAME",
    "NoProfilerDataError",
    "ProfilerReportService",
    "job_profiler_prefix",
    "job_report",
    "profiler_report_service",
    "render_html",
    "report_data",
    "report_json",
    "report_prefix",
    "write_report",
]

SERVICES.register(SERVICE_NAME, profiler_report_service)
