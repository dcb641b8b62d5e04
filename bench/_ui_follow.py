"""The follow part of bench/ui.py: a real job's new log line in open job pages, and the server's
memory while ten browsers follow it.

A ``trainops server`` runs as a process of its own on a fresh home (so its RSS is the server's
alone); a real job (``hello``-sized, submitted with ``trainops submit``) prints a numbered line
with its own ``time.time()`` every ``--interval`` seconds. Headless Chromium opens the job's page
in ``--followers`` contexts (signed in once, the session copied); each page records, with a
MutationObserver, when each line first appears. A line's latency is that moment minus the time
the script printed it (one clock: the same machine). The server's RSS is read from /proc before
the pages open (the job already running) and every 0.2 s while they follow.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

_CLI = ["-c", "import sys; from trainops.cli import entry; sys.exit(entry())"]
_SCRIPT = """\
import sys, time
for i in range({count}):
    print(f"live line {{i}} at {{time.time():.6f}}", flush=True)
    time.sleep({interval})
"""
_SPEC = """\
base_job_name: follow
entry_point: follow.py
source_dir: .
instance_type: ml.m5.large
stopping_condition:
  max_runtime_in_seconds: 600
"""
# Installed before any page script: the first moment each printed line is in #log.
_OBSERVER = """
window.__seen = {};
new MutationObserver(() => {
  const now = Date.now();
  document.querySelectorAll("#log td.line").forEach((cell) => {
    const m = /^live line (\\d+) at ([0-9.]+)$/.exec(cell.textContent);
    if (m && !(m[1] in window.__seen)) window.__seen[m[1]] = [now, parseFloat(m[2]) * 1000];
  });
}).observe(document, {childList: true, subtree: true, characterData: true});
window.__opened = Date.now();
"""


def _rss_samples(pid: int, count: int) -> int:
    """The most of ``count`` readings of ``pid``'s RSS (KiB), 0.1 s apart."""
    most = 0
    for _ in range(count):
        most = max(most, _rss_kb(pid))
        time.sleep(0.1)
    return most


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class _Server:
    """``trainops server`` on ``home``, its UI link read from what it prints."""

    def __init__(self, home: Path) -> None:
        self.env = os.environ | {"TRAINOPS_HOME": str(home)}
        self.proc = subprocess.Popen(
            [sys.executable, *_CLI, "server", "--port", "0"],
            env=self.env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stderr is not None
        self.link = ""
        for line in self.proc.stderr:
            if line.startswith("Web UI: "):
                self.link = line.split()[2]
                break
        if not self.link:
            raise RuntimeError("trainops server printed no UI link")
        self.url = self.link.split("/ui/")[0]
        self.token = (home / "token").read_text().strip()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _submit(server: _Server, work: Path, count: int, interval: float) -> str:
    (work / "follow.py").write_text(_SCRIPT.format(count=count, interval=interval))
    (work / "follow.yaml").write_text(_SPEC)
    out = subprocess.run(
        [sys.executable, *_CLI, "submit", "follow.yaml"],
        env=server.env, cwd=work, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def _wait_running(server: _Server, name: str) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        while True:
            status = client.get(f"/api/v1/jobs/{name}").json()["TrainingJobStatus"]
            if status == "InProgress":
                return
            if status in ("Completed", "Failed", "Stopped"):
                raise RuntimeError(f"the follow job ended before it was followed: {status}")
            time.sleep(0.1)


def follow(chromium: str, followers: int, lines: int, interval: float) -> dict[str, Any]:
    """Latencies of the job's lines in ``followers`` open pages and the server's RSS."""
    import tempfile

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="trainops-ui-follow-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        server = _Server(home)
        try:
            name = _submit(server, work, lines, interval)
            _wait_running(server, name)
            time.sleep(1.0)  # the job's first lines in; the server settled with its one job
            before = _rss_samples(server.proc.pid, 5)
            samples: list[int] = []
            seen: list[dict[str, Any]] = []
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=chromium, args=["--no-sandbox"]
                )
                first = browser.new_context()
                first.new_page().goto(server.link)
                state = first.storage_state()
                pages = []
                for _ in range(followers):
                    context = browser.new_context(storage_state=state)
                    context.add_init_script(_OBSERVER)
                    page = context.new_page()
                    page.goto(f"{server.url}/ui/jobs/{name}", wait_until="load")
                    pages.append(page)
                deadline = time.monotonic() + lines * interval + 30
                last = str(lines - 1)
                while time.monotonic() < deadline:
                    samples.append(_rss_kb(server.proc.pid))
                    if all(p.evaluate(f"() => '{last}' in window.__seen") for p in pages):
                        break
                    time.sleep(0.2)
                for page in pages:
                    seen.append(page.evaluate("() => [window.__opened, window.__seen]"))
                browser.close()
        finally:
            server.stop()
    latencies = [
        round(shown - printed, 1)
        for opened, marks in seen
        for shown, printed in marks.values()
        if printed > opened  # printed while the page was open: a live line, not the first load
    ]
    if not latencies:
        sys.exit("no page showed a line the job printed while it was open")
    return {
        "followers": followers, "lines": lines, "interval_s": interval,
        "new_line_ms": {
            "count": len(latencies), "median": statistics.median(latencies),
            "p95": sorted(latencies)[int(0.95 * (len(latencies) - 1))], "max": max(latencies),
        },
        "server_rss_mb": {
            "before": round(before / 1024, 1), "while_median": round(statistics.median(samples) / 1024, 1),
            "while_max": round(max(samples) / 1024, 1),
            "added_max": round((max(samples) - before) / 1024, 1),
        },
    }  # fmt: skip


if __name__ == "__main__":  # python bench/_ui_follow.py CHROMIUM FOLLOWERS LINES
    print(follow(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 0.25))
