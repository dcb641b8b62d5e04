"""Through the real host agent: a job with ``profiler_config`` runs a plain PyTorch script whose
steps are timed with no code change (the framework sidecar's bootstrap on ``PYTHONPATH``).

The profiler sidecar (the system monitor and mirror, built beside this one) sets the two
variables; here a small stand-in in its place sets them as it does, so this test covers the
framework sidecar alone. Once the real one is present, the second test runs the same job
with it and finds the rows under the job's profiler prefix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.agent._support import make_job
from tests.profiler._support import SRC, rows, series
from trainops.agent import HostResult
from trainops.agent.contract._outputs import Artifact
from trainops.agent.sidecars import SIDECARS, Sidecar, SidecarContext
from trainops.agent.supervision._hostns import opt_ml_shown
from trainops.profiler._bootstrap import BOOTSTRAP_DIR
from trainops.protocol import HostOutcome

SCRIPT = """
import json, os, torch
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
optimizer = torch.optim.Adam(model.parameters())
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(40, 4)), batch_size=5)
for (x,) in loader:
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "pythonpath.json"), "w") as f:
    json.dump(os.environ["PYTHONPATH"].split(os.pathsep), f)
"""


class StandInProfiler(Sidecar):
    """Sets ``TRAINOPS_PROFILER_DIR`` and ``TRAINOPS_PROFILER_CONFIG`` as the profiler sidecar."""

    name = "profiler-stand-in"

    def __init__(self, context: SidecarContext) -> None:
        self.directory = context.state_dir / "profiler"
        self.config = context.state_dir / "profilerconfig.json"
        profiling = context.job.profiling
        assert profiling is not None
        document = {"host": context.host, "attempt": context.assignment.attempt, "job_start": 0}
        self.config.write_text(json.dumps({**document, "profiler_config": profiling.to_json()}))

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        return {
            "TRAINOPS_PROFILER_DIR": str(self.directory),
            "TRAINOPS_PROFILER_CONFIG": str(self.config),
        }

    def start(self) -> None:
        return None

    def finish(self) -> list[Artifact]:
        return []


def test_the_framework_sidecar_times_a_plain_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[StandInProfiler] = []

    def stand_in(context: SidecarContext) -> Sidecar | None:
        made.append(StandInProfiler(context))
        return made[-1]

    job = make_job(
        tmp_path, {"train.py": SCRIPT}, profiler_config={"system_monitor_interval_millis": 100}
    )
    environ = dict(os.environ, PYTHONPATH=str(SRC))
    with SIDECARS.added("profiler", stand_in, replace=True):
        assert job.run(environ) == HostResult(HostOutcome.COMPLETED, 0, None)
    (profiler,) = made
    found = rows(series(profiler.directory, "steps"))
    assert [(r["step"], r["samples"]) for r in found] == [(s, 5.0) for s in range(8)]
    path = json.loads((job.root / "output/data/pythonpath.json").read_text())
    assert path[0] == str(BOOTSTRAP_DIR)  # first, and what was there is kept
    # the script sees its code at /opt/ml/code where namespaces show the tree there
    code = "/opt/ml/code" if opt_ml_shown(True) else str(job.root / "code")
    assert code in path and str(SRC) in path


def test_a_job_without_profiler_config_gets_no_bootstrap(tmp_path: Path) -> None:
    job = make_job(tmp_path, {"train.py": SCRIPT})
    assert job.run(dict(os.environ, PYTHONPATH=str(SRC))).outcome is HostOutcome.COMPLETED
    path = json.loads((job.root / "output/data/pythonpath.json").read_text())
    assert str(BOOTSTRAP_DIR) not in path


def test_with_the_real_profiler_sidecar_the_rows_reach_the_profiler_prefix(
    tmp_path: Path,
) -> None:
    job = make_job(tmp_path, {"train.py": SCRIPT}, profiler_config={})
    assert job.run(dict(os.environ, PYTHONPATH=str(SRC))).outcome is HostOutcome.COMPLETED
    prefix = job.object_path(job.assignment.output_prefix) / "profiler-output"
    found = rows(series(prefix, "steps"))
    assert [(r["step"], r["samples"]) for r in found] == [(s, 5.0) for s in range(8)]
