"""A job's secrets leave its host masked: the agent's own lines, the failure reason it reports
and ``output/failure``. The script's own lines are reported as it wrote them (the views mask
them when read), and ``hyperparameters.json`` keeps the value: the script needs it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.agent._support import make_job
from trainops._errors import ConfigError
from trainops._home import make_private
from trainops.protocol import EventKind, HostOutcome

SECRET = "hunter2hunter2"
SCRIPT = """
import sys
print("args:", " ".join(sys.argv[1:]), flush=True)
raise ValueError(f"cannot connect as admin:{sys.argv[sys.argv.index('--db_password') + 1]}")
"""


def test_the_agent_masks_the_jobs_secrets_in_what_it_reports(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": SCRIPT},
        hyperparameters={"db_password": SECRET, "api_key": "abc", "lr": 0.1},
        environment={"SERVICE_TOKEN": "tok-123456789"},
    )
    result = job.run()
    assert result.outcome is HostOutcome.FAILED
    [exit_event] = job.reporter.of(EventKind.EXIT)
    reason = str(exit_event["failure_reason"])
    assert "ValueError: cannot connect as admin:***" in reason
    assert "--api_key *** --db_password *** --lr 0.1" in reason
    assert (job.root / "output/failure").read_text() == reason == result.failure_reason
    agent_lines = job.reporter.lines("agent")
    [invoking] = [line for line in agent_lines if line.startswith("Invoking the script")]
    assert invoking.endswith("train.py --api_key *** --db_password *** --lr 0.1")
    trainops_lines = [
        line
        for line in (job.state_dir / "host.log").read_text().splitlines()
        if "[trainops]" in line
    ]
    for text in [reason, *agent_lines, *trainops_lines]:
        assert SECRET not in text and "--api_key abc" not in text
    # the script's own print is its own: kept as written, masked by the views when read
    assert f"args: --api_key abc --db_password {SECRET} --lr 0.1" in job.reporter.lines("stdout")
    config = json.loads((job.root / "input/config/hyperparameters.json").read_text())
    assert json.loads(config["db_password"]) == SECRET  # JSON-encoded, as SageMaker writes it


def test_the_hosts_tree_and_log_are_private_to_their_owner(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": "print('hi')\n"}, hyperparameters={"db_password": SECRET})
    assert job.run().outcome is HostOutcome.COMPLETED
    assert _mode(job.root) == _mode(job.root / "input/config") == 0o700
    configs = sorted((job.root / "input/config").iterdir())
    assert [p.name for p in configs] == [
        "hyperparameters.json",
        "inputdataconfig.json",
        "resourceconfig.json",
    ]
    assert {_mode(p) for p in configs} == {0o600}
    assert _mode(job.state_dir / "host.log") == 0o600


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_home_is_made_private_and_one_that_cannot_be_is_a_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    make_private(home, home / "jobs")
    assert _mode(home) == _mode(home / "jobs") == 0o700
    if os.geteuid() == 0:
        return  # root may chmod anything: the refusal below is for a user's home
    shared = Path("/")
    with pytest.raises(ConfigError, match="cannot be made private"):
        make_private(shared)
