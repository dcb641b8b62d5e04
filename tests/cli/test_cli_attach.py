"""Every command attaches to the server already running for its home (docs/cli.md, Which server).

``trainops run`` and ``trainops submit`` used to refuse or demand TRAINOPS_SERVER while a server
served the home, though ``jobs`` and ``describe`` attached to it. Now all of them attach, with
the home's API token, and no environment variable is needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._harness import Server, trainops, wait_for, write_job

pytestmark = pytest.mark.slow

HELLO = "print('hello')\n"


@pytest.fixture
def home_server(trainops_home: Path) -> Iterator[Server]:
    server = Server(trainops_home).start()
    yield server
    server.stop()


def test_every_command_attaches_to_the_home_server(
    tmp_path: Path, trainops_home: Path, home_server: Server
) -> None:
    spec = write_job(tmp_path / "a", HELLO, job_name="attached-run")
    ran = trainops("run", str(spec), home=trainops_home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Job attached-run: Completed" in ran.stdout
    submitted = trainops(
        "submit", str(write_job(tmp_path / "b", HELLO, base_job_name="later")),
        home=trainops_home,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    name = submitted.stdout.strip()
    assert name.startswith("later-")

    def ended() -> bool:
        shown = trainops("describe", name, home=trainops_home)
        return (
            shown.returncode == 0 and json.loads(shown.stdout)["TrainingJobStatus"] == "Completed"
        )

    wait_for(ended, timeout=120)
    listed = trainops("jobs", home=trainops_home)
    assert "attached-run" in listed.stdout and name in listed.stdout
    # `run` could not have started an embedded server: the home's server holds the home's lock.
    assert home_server.proc is not None and home_server.proc.poll() is None


def test_submit_without_any_server_says_how_to_get_one(tmp_path: Path, trainops_home: Path) -> None:
    spec = write_job(tmp_path, HELLO, job_name="nowhere")
    result = trainops("submit", str(spec), home=trainops_home)
    assert result.returncode == 2
    assert "needs a running server that outlives it" in result.stderr
    assert "every command of the same TRAINOPS_HOME finds it" in result.stderr
