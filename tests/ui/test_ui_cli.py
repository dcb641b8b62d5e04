"""``trainops ui`` and ``trainops run --ui`` as real processes: each prints a one-time login
link to its server's web UI, the link signs a browser in, and ``run --ui`` keeps its embedded
server (and the UI) up after the job until Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx
import pytest

from tests.e2e._harness import CLI, cli_env, write_job

pytestmark = pytest.mark.slow
_LINK = re.compile(r"Web UI: (http://127\.0\.0\.1:\d+/ui/login\?code=[\w-]+)")


def _link_from(stream: IO[str]) -> str:
    seen = []
    for line in stream:
        seen.append(line)
        if found := _LINK.search(line):
            return found.group(1)
    raise AssertionError(f"no login link printed: {''.join(seen)[-2000:]}")


@contextmanager
def _process(args: list[str], home: Path, *, out: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [*CLI, *args], env=cli_env(home), text=True,
        stdout=subprocess.PIPE if out == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if out == "stderr" else subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=60)


def _signed_in_jobs_page(link: str) -> str:
    with httpx.Client(follow_redirects=True, timeout=60) as browser:
        page = browser.get(link)
        assert page.status_code == 200 and "<h1>Training jobs</h1>" in page.text
        assert browser.get(link).status_code == 403  # once only
        return page.text


def test_trainops_ui_serves_the_home_and_prints_a_login_link(trainops_home: Path) -> None:
    with _process(["ui", "--port", "0"], trainops_home, out="stderr") as process:
        assert process.stderr is not None
        _signed_in_jobs_page(_link_from(process.stderr))
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0


def test_run_with_ui_keeps_the_server_up_after_the_job(trainops_home: Path, tmp_path: Path) -> None:
    spec = write_job(tmp_path / "hello", 'print("hello")\n', base_job_name="hello")
    with _process(["run", str(spec), "--ui"], trainops_home, out="stdout") as process:
        assert process.stdout is not None
        _link_from(process.stdout)  # printed once the job is submitted
        for line in process.stdout:
            if "serving until Ctrl-C" in line:
                break
        page = _signed_in_jobs_page(_LINK.search(line).group(1))  # type: ignore[union-attr]
        assert re.search(r'data-job="hello-[^"]+".*?s-completed', page)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
