"""The web UI's jobs page on a big history, in headless Chromium: paint, interactive, bytes.

Issue 25's targets for the jobs page, against a server holding 10,000 jobs: first contentful
paint <= 300 ms, fully interactive <= 1 s, <= 300 KB transferred per page. This fills a fresh
home's store with ``--jobs`` finished jobs (straight into the store, as a long history would
have them), starts an embedded server on it, signs Debian's Chromium in (Playwright, launched by
its path) and loads ``/ui/jobs`` (50 a page), a filtered page and the 100th page ``--loads``
times each, reading the browser's own timings (``first-contentful-paint``, the navigation's
``domInteractive`` and ``loadEventEnd``) and the bytes transferred (the document and every
resource). The server's time to render each page (the HTML alone, over HTTP) is measured too.
Results go to bench/results/ui.json. (The job page's targets, with a 200,000-line log and a
400,000-point metric, belong with the job page.)

    python bench/ui.py [--jobs 10000] [--loads 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from trainops._settings import Settings
from trainops.server import EmbeddedServer
from trainops.server.routes import job_cursor
from trainops.spec import JobSpec
from trainops.store import MetadataStore

BENCH = Path(__file__).resolve().parent
TARGETS = {"fcp_ms": 300.0, "interactive_ms": 1000.0, "transferred_kb": 300.0}
_TIMINGS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  const bytes = [nav, ...performance.getEntriesByType("resource")]
    .reduce((sum, e) => sum + (e.transferSize || e.encodedBodySize || 0), 0);
  return {fcp: paint ? paint.startTime : null, interactive: nav.domInteractive,
          load: nav.loadEventEnd, bytes};
}"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the store (10000)")
    parser.add_argument("--loads", type=int, default=5, help="loads of each page (default 5)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "ui.json")
    return parser.parse_args(argv)


def fill(home: Path, count: int) -> None:
    store = MetadataStore(home / "trainops.db")
    spec = JobSpec(entry_point="train.py", instance_type="ml.m5.large").view()
    try:
        for i in range(count):
            store.create_job(
                name=f"job-{i:06d}", spec=spec, code_uri="file:///code.tar.gz",
                output_prefix=f"file:///out/job-{i:06d}", max_attempts=1,
                status=("Completed", "Failed", "Stopped")[i % 3], secondary_status="Completed",
                message="done", now=1_700_000_000.0 + i,
            )  # fmt: skip
    finally:
        store.close()


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    sys.exit("no Chromium here: make install-chromium")


def measure(url: str, link: str, pages: dict[str, str], loads: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    results: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        context = browser.new_context()
        page = context.new_page()
        page.goto(link)
        for name, path in pages.items():
            runs = []
            for _ in range(loads + 1):  # the first load warms the browser's cache of ui.js/css
                answer = page.goto(url + path, wait_until="load")
                assert answer is not None and answer.status == 200, (path, answer)
                runs.append(page.evaluate(_TIMINGS))
            runs = runs[1:]
            results[name] = {
                "fcp_ms": statistics.median(r["fcp"] for r in runs if r["fcp"] is not None),
                "interactive_ms": statistics.median(r["interactive"] for r in runs),
                "load_ms": statistics.median(r["load"] for r in runs),
                "transferred_kb": round(max(r["bytes"] for r in runs) / 1024, 1),
            }
        browser.close()
    return results


def render_times(url: str, link: str, pages: dict[str, str], loads: int) -> dict[str, float]:
    with httpx.Client(base_url=url, timeout=60) as client:
        client.get(link)
        times = {}
        for name, path in pages.items():
            runs = []
            for _ in range(loads):
                start = time.perf_counter()
                client.get(path).raise_for_status()
                runs.append((time.perf_counter() - start) * 1000)
            times[name] = round(statistics.median(runs), 1)
    return times


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trainops-ui-bench-") as tmp:
        home = Path(tmp)
        fill(home, args.jobs)
        store = MetadataStore(home / "trainops.db")  # the 100th page of 50, keyset-paged:
        last = store.list_jobs(limit=99 * 50)[-1]  # its cursor is the 99th page's last job's
        store.close()
        after = job_cursor("created", last)
        pages = {
            "first_page": "/ui/jobs",
            "filtered": "/ui/jobs?status=Failed&name=job-00",
            "page_100": f"/ui/jobs?after={quote(after)}",
        }
        with EmbeddedServer(Settings(home=home)) as server:
            link = server.ui_link()
            browser = measure(server.url, link, pages, args.loads)
            rendered = render_times(server.url, server.ui_link(), pages, args.loads)
    result = {
        "jobs": args.jobs, "loads": args.loads, "targets": TARGETS, "browser": browser,
        "server_render_ms": rendered,
        "within_targets": all(
            browser[p][k] <= limit for p in pages for k, limit in TARGETS.items()
        ),
    }  # fmt: skip
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["within_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
