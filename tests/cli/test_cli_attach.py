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


REFUSED = {
    "unknown field": ("entry_point: train.py\nmax_retry_attempts: 2\n", 1),
    "several problems": (
        "entry_point: train.py\n"
        "instance_type: ml.c5.xlarg\n"
        "inputs:\n"
        "  'bad name':\n"
        "    uri: data/\n"
        "metric_definitions:\n"
        "  - {name: loss, regex: 'loss=[0-9.]+'}\n",
        3,
    ),
    "bad base name": ("entry_point: train.py\nbase_job_name: no_underscores\n", 1),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_running_servers_refusal_reads_like_local_validation(
    tmp_path: Path, trainops_home: Path, home_server: Server, case: str
) -> None:
    # With a server running, the CLI leaves validation to it (no spec models in the client):
    # the message must be the one local validation gives, lines included, and nothing stays.
    text, count = REFUSED[case]
    (tmp_path / "train.py").write_text(HELLO)
    (tmp_path / "bad.yaml").write_text(text)
    attached = trainops("run", str(tmp_path / "bad.yaml"), home=trainops_home)
    alone = trainops("run", str(tmp_path / "bad.yaml"), home=tmp_path / "other-home")
    assert attached.returncode == alone.returncode == 2, attached.stderr
    assert attached.stderr == alone.stderr
    lines = attached.stderr.splitlines()
    assert len(lines) == 1 + count and all("(line " in line for line in lines[1:]), lines
    assert list((trainops_home / "objects").rglob("sourcedir.tar.gz")) == []
    assert not (tmp_path / "other-home").exists()
    listed = trainops("jobs", home=trainops_home)
    assert listed.returncode == 0 and "train-" not in listed.stdout


def test_back_to_back_runs_share_one_home(tmp_path: Path) -> None:
    # Each run starts and stops an embedded server on the same home: the next one must neither
    # attach to the one going away nor trip over its lock.
    home = tmp_path / "home"
    for index in range(3):
        spec = write_job(tmp_path / str(index), HELLO, job_name=f"in-turn-{index}")
        ran = trainops("run", str(spec), home=home)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert f"Job in-turn-{index}: Completed" in ran.stdout


def test_an_explicit_name_that_exists_leaves_that_jobs_source_alone(
    tmp_path: Path, trainops_home: Path, home_server: Server
) -> None:
    first = write_job(tmp_path / "first", HELLO, job_name="kept")
    assert trainops("run", str(first), home=trainops_home).returncode == 0
    [source] = list((trainops_home / "objects").rglob("kept/source/sourcedir.tar.gz"))
    before = source.read_bytes()
    # The spec's own problems come first, as local validation gives them; a valid spec is told
    # the name is taken. Neither uploads anything over the existing job's source.
    bad = write_job(tmp_path / "bad", "print('other')\n", job_name="kept", max_retry_attempts=2)
    refused = trainops("run", str(bad), home=trainops_home)
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[1].startswith("  max_retry_attempts (line 4): unknown field")
    again = write_job(tmp_path / "again", "print('other')\n", job_name="kept")
    taken = trainops("run", str(again), home=trainops_home)
    assert taken.returncode == 2
    assert taken.stderr == "trainops: error: a job named 'kept' already exists\n"
    assert source.read_bytes() == before
