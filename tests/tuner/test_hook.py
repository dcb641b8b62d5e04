"""A control plane that never sees a tuning job never imports the tuner or the tuning library
(every `trainops run` starts one): the registered hook loads them with the first tuning job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
from trainops.server import _run  # what a control plane imports
from trainops._settings import Settings
from trainops.control.services import SERVICES, ServiceContext
from trainops.store import MetadataStore

store = MetadataStore(__import__("pathlib").Path(sys.argv[1]))
hook = SERVICES["tuner"](ServiceContext(store, Settings.load(), lambda n, m: False, lambda: 1.0))
hook.tick()
print("before", any(m.startswith(("trainops.tuning", "trainops.tuner._service")) for m in sys.modules))
store.create_tuning_job("t", {}, "file:///c", 1.0)
hook.tick()  # the stored config is invalid: the tuner loads, and ends it Failed
ended = store.get_tuning_job("t")
print("after", "trainops.tuning._search" in sys.modules, ended.status)
print(ended.failure_reason)
"""


def test_the_tuner_loads_with_the_first_tuning_job(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "t.db")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    before, after, reason = result.stdout.splitlines()
    assert (before, after) == ("before False", "after True Failed")
    assert reason.startswith("its stored config is invalid: training_job: Field required;")
