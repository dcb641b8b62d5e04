"""End to end: a real job's debugger rule evaluated while it runs, stopping it and notifying
by command.

The script writes its tensors with the job-side writer (``TensorFileWriter``) straight into the
job's debug-output prefix (``<output_path>/<job>/debug-output``): healthy gradients, then from
step 40 on vanishing ones. ``trainops run`` starts an embedded control plane whose
debugger-rules service finds them, stops the job and prints the verdict. The lag from the
vanishing step's files to the verdict is printed (measured, not asserted).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow

SCRIPT = """
import sys, time
import numpy as np
from pathlib import Path
from trainops.debugger import Collection, CollectionManager
from trainops.debugger.format import TensorFileWriter

out = Path(sys.argv[sys.argv.index("--tensors") + 1])
writer = TensorFileWriter(out, "worker_0")
writer.write_collections(CollectionManager([Collection("gradients", ["^gradient/.*"])]), 1)
for step in range(3000):
    scale = 1e-12 if step >= 40 else 0.1
    writer.write_step(step, "TRAIN", step, [("gradient/fc.weight", np.full((8, 8), scale, np.float32))])
    if step == 40:
        print(f"vanishing step written at {time.time():.3f}", flush=True)
    time.sleep(0.05)
print("finished without being stopped", flush=True)
"""


NOTIFY = [
    sys.executable,
    "-c",
    "import json, os, sys; f = json.load(sys.stdin);"
    " print('notified', os.environ['TRAINOPS_RULE'], f['status'], f['details'])",
]


def test_a_debugger_rule_stops_a_running_job(tmp_path: Path) -> None:
    output = tmp_path / "out"
    tensors = output / "vanishing" / "debug-output"
    spec = write_job(
        tmp_path,
        SCRIPT,
        job_name="vanishing",
        output_path=output.as_uri(),
        hyperparameters={"tensors": str(tensors)},
        rules=[
            {"rule": "vanishing_gradient", "actions": ["stop_training", {"command": NOTIFY}]},
            {"rule": "ExplodingTensor"},
        ],
        stopping_condition={"grace_period_in_seconds": 5},
    )
    home = tmp_path / "home"
    home.mkdir()
    run = trainops("run", str(spec), home=home, timeout=240)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "finished without being stopped" not in run.stdout
    assert (
        "Debugger rules:\n  VanishingGradient: IssuesFound: gradient gradient/fc.weight vanishes at step 40"
        in run.stdout
    )

    job = describe("vanishing", home)
    assert job["TrainingJobStatus"] == "Stopped"
    messages = [t["StatusMessage"] for t in job["SecondaryStatusTransitions"]]
    assert any(m.startswith("Stopped by rule VanishingGradient: ") for m in messages)
    statuses = {s["RuleConfigurationName"]: s for s in job["DebugRuleEvaluationStatuses"]}
    vanishing = statuses["VanishingGradient"]
    assert vanishing["RuleEvaluationStatus"] == "IssuesFound"
    actions = vanishing["Evaluation"]["Actions"]
    assert [(a["Type"], a["Ok"]) for a in actions] == [("stop_training", True), ("command", True)]
    # notified with the finding on stdin (by the control plane: the job was stopping already)
    assert (
        "notified VanishingGradient IssuesFound gradient gradient/fc.weight" in actions[1]["Detail"]
    )
    assert statuses["ExplodingTensor"]["RuleEvaluationStatus"] == "NoIssuesFound"
    assert job["ProfilerRuleEvaluationStatuses"] == []

    written = float(run.stdout.split("vanishing step written at ")[1].split()[0])
    from trainops.store import MetadataStore

    store = MetadataStore(home / "trainops.db")
    row = {r.name: r for r in store.rule_evaluations("vanishing")}["VanishingGradient"]
    store.close()
    print(f"lag from the step's files to the verdict: {row.result['found_time'] - written:.2f} s")


SYNCED = """
import os, time
import numpy as np
from pathlib import Path
from trainops.debugger import Collection, CollectionManager, load_hook_config
from trainops.debugger.format import TensorFileWriter

out = Path(load_hook_config(os.environ["SMDEBUG_CONFIG_FILE_PATH"]).local_path)
writer = TensorFileWriter(out, "worker_0")
writer.write_collections(CollectionManager([Collection("weights", [".*weight$"])]), 1)
for step in range(3000):
    value = np.nan if step == 30 else 0.5
    writer.write_step(step, "TRAIN", step, [("fc.weight", np.full((8, 8), value, np.float32))])
    time.sleep(0.05)
print("finished without being stopped", flush=True)
"""


def test_a_rule_reads_what_the_hosts_sync_while_the_job_runs(tmp_path: Path) -> None:
    """The whole path: the script writes into the hook config's LocalPath on its host, the
    host's debugger sidecar syncs it to the job's debug-output prefix, the rule reads it there."""
    spec = write_job(
        tmp_path,
        SYNCED,
        job_name="exploding",
        output_path=(tmp_path / "out").as_uri(),
        rules=[{"rule": "ExplodingTensor", "actions": ["stop_training"]}],
        stopping_condition={"grace_period_in_seconds": 5},
    )
    home = tmp_path / "home"
    home.mkdir()
    run = trainops("run", str(spec), home=home, timeout=240)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "finished without being stopped" not in run.stdout
    assert (
        "ExplodingTensor: IssuesFound: fc.weight holds 64 NaN and 0 infinite values at step 30"
        in run.stdout
    )
    job = describe("exploding", home)
    assert job["TrainingJobStatus"] == "Stopped"
    synced = Path(job["DebugOutputPath"].removeprefix("file://"))
    assert (synced / "index").is_dir()
