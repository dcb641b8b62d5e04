"""Job names on the command line: the whole name, a unique start of one, or ``latest``; and the
reading commands answer from the home's store, as a server would, when none runs.

Four real jobs run once for the module (``alpha``, ``alpha-one``, ``alpha-two``, ``beta-1``, in
that order); every command is the real CLI in a process of its own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e._harness import CLI, cli_env, free_port, trainops, wait_for, write_job
from trainops import ServerError
from trainops.client import Client

pytestmark = pytest.mark.slow

SCRIPT = 'import os\nprint("loss=0.5")\nprint("job", os.environ["TRAINING_JOB_NAME"])\n'
METRICS = [{"name": "loss", "regex": "loss=([0-9.]+)"}]
NAMES = ("alpha", "alpha-one", "alpha-two", "beta-1")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("names-home")
    jobs = tmp_path_factory.mktemp("names-jobs")
    for name in NAMES:
        spec = write_job(jobs / name, SCRIPT, job_name=name, metric_definitions=METRICS)
        result = trainops("run", str(spec), home=home)
        assert result.returncode == 0, result.stdout + result.stderr
    return home


def _ok(*args: str, home: Path) -> str:
    result = trainops(*args, home=home)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _refused(*args: str, home: Path) -> str:
    result = trainops(*args, home=home)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


def test_a_unique_start_of_a_name_names_the_job(home: Path) -> None:
    assert json.loads(_ok("describe", "alpha-o", home=home))["TrainingJobName"] == "alpha-one"
    assert "[algo-1] job alpha-two" in _ok("logs", "alpha-t", home=home)
    assert "[algo-1] job beta-1" in _ok("logs", "b", "--host", "algo-1", home=home)
    assert _ok("metrics", "bet", "--csv", home=home).splitlines()[1].endswith(",loss,0.5,algo-1")


def test_latest_is_the_newest_job(home: Path) -> None:
    assert json.loads(_ok("describe", "latest", home=home))["TrainingJobName"] == "beta-1"
    assert "[algo-1] job beta-1" in _ok("logs", "latest", home=home)
    # -f follows through a control plane (an embedded one here): the same name is resolved.
    assert "[algo-1] job alpha-two" in _ok("logs", "-f", "alpha-t", home=home)


def test_the_whole_name_wins_over_longer_names_that_start_with_it(home: Path) -> None:
    assert json.loads(_ok("describe", "alpha", home=home))["TrainingJobName"] == "alpha"


def test_an_ambiguous_start_lists_the_candidates_newest_first(home: Path) -> None:
    for command in (["describe"], ["logs"], ["metrics"], ["stop"], ["report", "--json"]):
        stderr = _refused(*command, "alpha-", home=home)
        assert stderr == (
            "trainops: error: 'alpha-' starts the names of 2 jobs (alpha-two, alpha-one); "
            "give more of the name\n"
        )


def test_a_start_no_job_has_is_not_found(home: Path) -> None:
    assert _refused("describe", "gamma", home=home) == (
        "trainops: error: no job named 'gamma' or whose name starts with it\n"
    )
    assert "no job named '': a job's name has 1-63 characters" in _refused("logs", "", home=home)
    too_long = _refused("describe", "a" * 10_000, home=home)
    assert too_long.startswith("trainops: error: no job named 'aaaa") and len(too_long) < 300


def test_commands_that_need_a_control_plane_resolve_names_too(home: Path) -> None:
    # stop and report go through an embedded server: the name they act on is the whole one.
    assert "alpha-two" in _refused("stop", "alpha-t", home=home)
    assert "beta-1" in _refused("report", "beta", "--json", home=home)


def _healthy(url: str) -> bool:
    try:
        with Client(url) as client:
            return client.health()["status"] == "ok"
    except ServerError:
        return False


READS = [
    ["jobs"], ["describe", "alpha-one"], ["logs", "alpha-one"], ["metrics", "alpha-one", "--csv"],
    ["describe", "latest"], ["metrics", "alpha-one", "--name", "accuracy"],
]  # fmt: skip


def test_without_a_server_the_store_answers_as_the_server_does(home: Path) -> None:
    without = [trainops(*args, home=home) for args in READS]
    with _Server(home):  # now every command asks it
        with_server = [trainops(*args, home=home) for args in READS]
    for args, alone, served in zip(READS, without, with_server, strict=True):
        assert (alone.returncode, alone.stdout, alone.stderr) == (
            served.returncode,
            served.stdout,
            served.stderr,
        ), args
    assert "has no metric named 'accuracy'" in without[-1].stderr


class _Server:
    """``trainops server`` for the home, for the length of a ``with`` block."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        port = free_port()
        self.process = subprocess.Popen(
            [*CLI, "server", "--port", str(port)],
            env=cli_env(self.home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _healthy(url), timeout=60)
        return url

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=30)


def test_reading_a_home_without_a_store_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    for args in (["jobs"], ["describe", "x"], ["logs", "latest"], ["metrics", "x"]):
        result = trainops(*args, home=home)
        assert result.returncode == (0 if args == ["jobs"] else 2), result.stderr
    assert not home.exists()  # no server started: no lock, no token, no database
