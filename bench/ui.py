"""The web UI's performance targets in one run, in headless Chromium: paint, interactive, bytes,
a live line's latency and the server's memory with ten followers; Optuna Dashboard beside it.

Issue 25's targets: against a server holding 10,000 jobs, the jobs page's first contentful paint
<= 300 ms and interactive <= 1 s; the job page with a 200,000-line log and a 400,000-point metric
loaded <= 1 s; <= 300 KB transferred per page; a new log line visible <= 500 ms after the job's
script printed it; the server's added memory while ten browsers follow a job <= 50 MB.

1. Jobs page: a fresh home's store gets ``--jobs`` finished jobs (straight into the store, as a
   long history would have them); an embedded server on it; Debian's Chromium (Playwright,
   launched by its path) signs in and loads ``/ui/jobs`` (50 a page), a filtered page and the
   100th page ``--loads`` times each, reading the browser's own timings (``first-contentful-
   paint``, waited for: Chromium may record it after the load event; the navigation's
   ``domInteractive`` and ``loadEventEnd``) and the bytes transferred (the document and every
   resource). Interleaved with these loads (A, B, A, B), when ``optuna-dashboard`` imports (the
   bench extra; or put it on PYTHONPATH), Optuna Dashboard's page of a 10,000-trial study
   (bench/_ui_optuna.py) in the same browser, the same timings. The server's time to render
   each page (the HTML alone, over HTTP) is measured too.
2. Job page: bench/ui_job.py's big job (``--lines`` log lines, ``--points`` metric points,
   written as an agent sends them) on a second embedded server, loaded ``--loads`` times.
3. Following: a real job on a ``trainops server`` process of its own prints a numbered line with
   its ``time.time()`` every 0.25 s; ``--followers`` contexts follow its page; each line's
   latency is when a page first shows it minus when the script printed it; the server process's
   RSS before the pages open and while they follow (bench/_ui_follow.py).

Results go to bench/results/ui.json, with the load average.

    python bench/ui.py [--jobs 10000] [--loads 5] [--followers 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
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
TARGETS = {
    "fcp_ms": 300.0, "interactive_ms": 1000.0, "job_page_ms": 1000.0, "transferred_kb": 300.0,
    "new_line_ms": 500.0, "added_rss_mb": 50.0,
}  # fmt: skip
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
    parser.add_argument("--lines", type=int, default=200_000, help="job page's log lines")
    parser.add_argument("--points", type=int, default=400_000, help="job page's metric points")
    parser.add_argument("--followers", type=int, default=10, help="pages following (10)")
    parser.add_argument("--live-lines", type=int, default=60, help="lines the job prints (60)")
    parser.add_argument("--trials", type=int, default=10_000, help="Optuna's study (10000)")
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


_FCP = "() => performance.getEntriesByName('first-contentful-paint').length > 0"
_SETTLED = """() => Math.max(performance.getEntriesByType("navigation")[0].loadEventEnd,
  ...performance.getEntriesByType("resource").map((e) => e.responseEnd))"""


def _load(page: Any, url: str, idle: bool) -> dict[str, Any]:
    """One load's timings; ``idle``: wait for the network to settle (a page that fetches its
    data after loading) and also give when its last response ended."""
    answer = page.goto(url, wait_until="networkidle" if idle else "load")
    assert answer is not None and answer.status == 200, (url, answer)
    page.wait_for_function(_FCP)  # Chromium may record the paint after the load event
    run: dict[str, Any] = page.evaluate(_TIMINGS)
    if idle:
        run["settled"] = page.evaluate(_SETTLED)
    return run


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary = {
        "fcp_ms": statistics.median(r["fcp"] for r in runs),
        "interactive_ms": round(statistics.median(r["interactive"] for r in runs), 1),
        "load_ms": round(statistics.median(r["load"] for r in runs), 1),
        "transferred_kb": round(max(r["bytes"] for r in runs) / 1024, 1),
    }
    if "settled" in runs[0]:
        summary["settled_ms"] = round(statistics.median(r["settled"] for r in runs), 1)
    return summary


def measure(
    url: str, link: str, pages: dict[str, str], loads: int, peer: str | None = None
) -> dict[str, Any]:
    """Medians of each page's timings over ``loads`` loads (after one warm-up load), and the
    most bytes; with ``peer`` (Optuna Dashboard's page), its loads interleaved with ours."""
    from playwright.sync_api import sync_playwright

    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in pages}
    peer_runs: list[dict[str, Any]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_context().new_page()
        page.goto(link)
        other = browser.new_context().new_page()
        for _ in range(loads + 1):  # the first round warms the browser's cache of scripts
            for name, path in pages.items():
                # "load": our page is rendered on the server, and its change stream's
                # long-poll stays open, so the network is never idle (Optuna's: idle).
                runs[name].append(_load(page, url + path, idle=False))
                if peer is not None and name == "first_page":
                    peer_runs.append(_load(other, peer, idle=True))
        browser.close()
    results = {name: _summary(r[1:]) for name, r in runs.items()}
    if peer is not None:
        results["optuna_dashboard"] = _summary(peer_runs[1:])
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


def jobs_page(args: argparse.Namespace, peer: str | None) -> dict[str, Any]:
    """Part 1: the jobs page on ``--jobs`` jobs (and Optuna Dashboard's, interleaved)."""
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
            browser = measure(server.url, server.ui_link(), pages, args.loads, peer)
            rendered = render_times(server.url, server.ui_link(), pages, args.loads)
    return {"browser": browser, "server_render_ms": rendered}


def job_page(args: argparse.Namespace) -> dict[str, Any]:
    """Part 2: bench/ui_job.py's big job's page."""
    import ui_job

    with tempfile.TemporaryDirectory(prefix="trainops-ui-job-bench-") as tmp:
        writer = ui_job._Writer(Path(tmp))
        writer.fill(args.lines, args.points)
        path = f"/ui/jobs/{ui_job._JOB}"
        try:
            with EmbeddedServer(Settings(home=Path(tmp))) as server:
                browser = ui_job.measure(server.url, server.ui_link(), path, args.loads)
                rendered = render_times(server.url, server.ui_link(), {"job_page": path}, 3)
        finally:
            writer.store.close()
    return {"browser": browser, "server_render_ms": rendered["job_page"]}


class _Optuna:
    """Optuna Dashboard on ``trials`` trials in a process of its own, if it imports here."""

    def __init__(self, trials: int) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.url: str | None = None
        self.version: str | None = None
        check = [sys.executable, "-c", "import optuna_dashboard as d; print(d.__version__)"]
        found = subprocess.run(check, capture_output=True, text=True, check=False)
        if found.returncode != 0:
            return
        self.version = found.stdout.strip()
        port = _free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH / "_ui_optuna.py"), str(port), str(trials)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            sys.exit("Optuna Dashboard did not start")
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/api/studies", timeout=5).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        self.url = f"{base}/dashboard/studies/0"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _within(result: dict[str, Any]) -> dict[str, bool]:
    jobs = result["jobs_page"]["browser"]
    ours = [jobs[p] for p in ("first_page", "filtered", "page_100")]
    job = result["job_page"]["browser"]
    follow = result["follow"]
    return {
        "jobs_fcp": all(p["fcp_ms"] <= TARGETS["fcp_ms"] for p in ours),
        "jobs_interactive": all(p["interactive_ms"] <= TARGETS["interactive_ms"] for p in ours),
        "job_page_load": job["load_ms"] <= TARGETS["job_page_ms"],
        "transferred": all(p["transferred_kb"] <= TARGETS["transferred_kb"] for p in [*ours, job]),
        "new_line": follow["new_line_ms"]["median"] <= TARGETS["new_line_ms"],
        "followers_memory": follow["server_rss_mb"]["added_max"] <= TARGETS["added_rss_mb"],
    }


def main(argv: list[str] | None = None) -> int:
    from _ui_follow import follow

    args = parse_args(argv)
    load_before = os.getloadavg()
    optuna = _Optuna(args.trials)
    try:
        jobs = jobs_page(args, optuna.url)
    finally:
        optuna.stop()
    result: dict[str, Any] = {
        "jobs": args.jobs, "lines": args.lines, "points": args.points, "loads": args.loads,
        "targets": TARGETS, "jobs_page": jobs, "job_page": job_page(args),
        "follow": follow(chromium(), args.followers, args.live_lines, 0.25),
        "optuna_dashboard": (
            {"version": optuna.version, "trials": args.trials} if optuna.version else None
        ),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    result["within"] = _within(result)
    result["within_targets"] = all(result["within"].values())
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["within_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
