"""Headless Chromium for the report's tests: load a file, capture its console, take a screenshot.

Chromium's ``--enable-logging=stderr`` writes every console message of the page (log, warning,
error, and Content-Security-Policy violations) as an ``INFO:CONSOLE`` line; the report page has no
script, so any such line is a failure. Chromium comes from Debian (``make install-chromium``);
without it the tests that need it are skipped, saying so (failed in CI: tests/_support/system.py).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests._support.system import require

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = [
    "--headless",
    "--no-sandbox",  # the tests may run as root, where Chromium refuses its sandbox
    "--disable-gpu",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--hide-scrollbars",
]


@dataclass(frozen=True)
class Loaded:
    dom: str
    console: list[str]


def chromium() -> str:
    """The browser's path; without one, the test is skipped with the reason (failed in CI)."""
    return str(require("chromium"))


def _run(page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run(
            [chromium(), *_FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def load(page: Path) -> Loaded:
    """The page's DOM after loading, and every console message it produced."""
    done = _run(page, "--enable-logging=stderr", "--v=0", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Loaded(done.stdout, console)


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 2000) -> Path:
    done = _run(page, f"--screenshot={out.resolve()}", f"--window-size={width},{height}")
    assert done.returncode == 0 and out.exists(), done.stderr[-2000:]
    return out
