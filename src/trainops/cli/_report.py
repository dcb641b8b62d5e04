"""``trainops report NAME``: the job's profiler report as a self-contained HTML file.

The server computes the report's data (``GET /jobs/{name}/profiler-report``), so this works
against a remote server too; the page is rendered here from that data and written with its JSON
beside it (``<page>.json``). A browser is opened only where one can show it (a display, not CI).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import webbrowser
from pathlib import Path

from trainops._errors import TrainopsError
from trainops.client import connect, resolve_job_name

__all__ = ["can_open_browser", "report"]


def report(args: argparse.Namespace) -> int:
    with connect() as client:
        name = resolve_job_name(client, args.name)
        data = client.profiler_report(name)
    if args.json:
        sys.stdout.write(json.dumps(data, indent=1, allow_nan=False) + "\n")
        return 0
    from trainops.report import render_html, report_json

    page = Path(args.output or f"{_safe(name)}-profiler-report.html").resolve()
    document = page.with_suffix(".json")
    _write(document, report_json(data))
    _write(page, render_html(data))
    state = "running, a snapshot" if data["job"]["running"] else data["job"]["status"]
    print(f"{name} ({state}): wrote {page} and {document.name}")
    if not args.no_open and can_open_browser():
        webbrowser.open(page.as_uri())
    return 0


def can_open_browser(environ: dict[str, str] | None = None) -> bool:
    """A browser can show a page here: not CI, and a display (macOS and Windows always have one)."""
    env = os.environ if environ is None else environ
    if env.get("CI") or env.get("TRAINOPS_NO_BROWSER"):
        return False
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def _safe(name: str) -> str:
    """A job name as a file name (job names are already [A-Za-z0-9-]; this is a second fence)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).lstrip(".") or "job"


def _write(path: Path, text: str) -> None:
    """Write ``text`` whole or not at all."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise TrainopsError(f"cannot write {path}: {exc.strerror or exc}") from None
