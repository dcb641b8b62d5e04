"""The web UI's job page on a big job, in headless Chromium: paint, interactive, bytes, and how
soon a new log line shows.

Issue 25's targets for a job's page, with a 200,000-line log and a 400,000-point metric: loaded
<= 1 s, <= 300 KB transferred, a new log line visible <= 500 ms after it was written. This makes
one job in a fresh home's store (straight into the store: ``--lines`` log lines in batches of
1000, ``--points`` points of ``loss`` in batches of 200, as an agent sends them), starts an
embedded server on it, signs Debian's Chromium in and loads ``/ui/jobs/big`` ``--loads`` times,
reading the browser's own timings and bytes (bench/ui.py's ``measure``). Then, with the page
open and following the log, it writes a line into the store ``--lines-live`` times and times
each until the browser shows it (the page follows the log with a long-poll: job.js). The server's time to render the page and its live parts is
measured too. Results go to bench/results/ui_job.json.

    python bench/ui_job.py [--lines 200000] [--points 400000] [--loads 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ui import _TIMINGS, chromium, render_times

from trainops._settings import Settings
from trainops.protocol import AgentEvent, EventKind
from trainops.server import EmbeddedServer
from trainops.spec import JobSpec
from trainops.store import MetadataStore, NewHost

BENCH = Path(__file__).resolve().parent
TARGETS = {"load_ms": 1000.0, "transferred_kb": 300.0, "new_line_ms": 500.0}
_JOB = "big"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000, help="log lines (200000)")
    parser.add_argument("--points", type=int, default=400_000, help="metric points (400000)")
    parser.add_argument("--loads", type=int, default=5, help="page loads (default 5)")
    parser.add_argument("--lines-live", type=int, default=5, help="live lines timed (5)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "ui_job.json")
    return parser.parse_args(argv)


class _Writer:
    """Writes the job's events into the store as its one host's agent would."""

    def __init__(self, home: Path) -> None:
        self.store = MetadataStore(home / "trainops.db")
        spec = JobSpec(entry_point="train.py", instance_type="ml.g5.2xlarge").view()
        job = self.store.create_job(
            name=_JOB, spec=spec, code_uri="file:///code.tar.gz", output_prefix="file:///out/big",
            max_attempts=1, status="Completed", secondary_status="Completed", message="done",
            now=1_700_000_000.0,
        )  # fmt: skip
        self.attempt = job.attempt
        self.store.create_hosts(
            _JOB, job.attempt, [NewHost(host="algo-1", root="/r", state_dir="/s")]
        )
        self.seq = 1

    def send(self, kind: EventKind, ts: float, data: dict[str, Any], span: int) -> None:
        self.store.ingest(_JOB, "algo-1", self.attempt, [AgentEvent(self.seq, ts, kind, data)])
        self.seq += span

    def fill(self, lines: int, points: int) -> None:
        for start in range(0, lines, 1000):
            batch = [
                f"step {i} loss={1 / (i + 1):.6f}" for i in range(start, min(lines, start + 1000))
            ]
            self.send(
                EventKind.LOG,
                1_700_000_000.0 + start / 100,
                {"stream": "stdout", "lines": batch},
                len(batch),
            )
        for start in range(0, points, 200):
            values = [1.0 / (i + 1) for i in range(start, min(points, start + 200))]
            ts = 1_700_000_000.0 + start / 200
            self.send(
                EventKind.METRIC,
                ts,
                {"name": "loss", "values": values, "timestamp": ts},
                len(values),
            )


def measure(url: str, link: str, path: str, loads: int) -> dict[str, Any]:
    """The page's paint, interactive and load times (medians) and the most bytes transferred.
    Chromium records the first contentful paint after the load event at times: wait for it."""
    from playwright.sync_api import sync_playwright

    runs = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_context().new_page()
        page.goto(link)
        for _ in range(loads + 1):  # the first load warms the browser's cache of ui.js/css
            answer = page.goto(url + path, wait_until="load")
            assert answer is not None and answer.status == 200, (path, answer)
            page.wait_for_function(
                "() => performance.getEntriesByName('first-contentful-paint').length > 0"
            )
            runs.append(page.evaluate(_TIMINGS))
        browser.close()
    runs = runs[1:]
    return {
        "fcp_ms": statistics.median(r["fcp"] for r in runs),
        "interactive_ms": statistics.median(r["interactive"] for r in runs),
        "load_ms": statistics.median(r["load"] for r in runs),
        "transferred_kb": round(max(r["bytes"] for r in runs) / 1024, 1),
    }


def new_line_latency(server: EmbeddedServer, writer: _Writer, count: int) -> list[float]:
    """Milliseconds from storing a line (and telling the controller, as the agent API does) to
    the open page showing it. The job is made InProgress for this, so the page follows it."""
    from playwright.sync_api import sync_playwright

    writer.store.update_job(_JOB, time.time(), status="InProgress", secondary_status="Training")
    url, link = server.url, server.ui_link()
    found = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_context().new_page()
        page.goto(link)
        page.goto(f"{url}/ui/jobs/{_JOB}", wait_until="load")
        for i in range(count):
            marker = f"live line {i}"
            start = time.perf_counter()
            writer.send(EventKind.LOG, time.time(), {"stream": "stdout", "lines": [marker]}, 1)
            server.controller.core.notify()
            page.wait_for_function(
                "(text) => [...document.querySelectorAll('#log td.line')]"
                ".some((cell) => cell.textContent === text)",
                arg=marker, timeout=30_000, polling=10,
            )  # fmt: skip
            found.append(round((time.perf_counter() - start) * 1000, 1))
        browser.close()
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trainops-ui-job-bench-") as tmp:
        home = Path(tmp)
        writer = _Writer(home)
        writer.fill(args.lines, args.points)
        pages = {"job_page": f"/ui/jobs/{_JOB}"}
        parts = pages | {
            "log_part": f"/ui/jobs/{_JOB}/-/log",
            "metrics_part": f"/ui/jobs/{_JOB}/-/metrics",
        }
        with EmbeddedServer(Settings(home=home)) as server:
            browser = {
                "job_page": measure(server.url, server.ui_link(), pages["job_page"], args.loads)
            }
            rendered = render_times(server.url, server.ui_link(), parts, args.loads)
            latency = new_line_latency(server, writer, args.lines_live)
        writer.store.close()
    page = browser["job_page"]
    result = {
        "lines": args.lines, "points": args.points, "loads": args.loads, "targets": TARGETS,
        "browser": browser, "server_render_ms": rendered, "new_line_ms": latency,
        "within_targets": page["load_ms"] <= TARGETS["load_ms"]
        and page["transferred_kb"] <= TARGETS["transferred_kb"]
        and statistics.median(latency) <= TARGETS["new_line_ms"],
    }  # fmt: skip
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["within_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
