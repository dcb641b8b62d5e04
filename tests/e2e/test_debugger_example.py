"""The debugger example (examples/debugger) through the CLI and the embedded server: the broken
model is stopped by one of its debugger rules, the healthy run of the same script completes with
every rule quiet, ``describe`` shows the debugger's fields, ``create_trial(<job name>)`` reads
the saved tensors, and the smdebug-style script runs unchanged."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e._harness import describe, trainops
from trainops._settings import Settings
from trainops.debugger import create_trial, modes

# each job takes well under a minute on two idle cores; a loaded machine may need several
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RULES = [
    "PoorWeightInitialization",
    "ExplodingTensor",
    "DeadRelu",
    "VanishingGradient",
    "LossNotDecreasing",
]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("debugger-example")
    ignore = shutil.ignore_patterns("data", "checkpoints")
    shutil.copytree(EXAMPLES / "digits", work / "digits", ignore=ignore)
    shutil.copytree(EXAMPLES / "debugger", work / "debugger")
    subprocess.run([sys.executable, "prepare_data.py"], check=True, cwd=work / "digits")
    return work / "debugger"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


def run(example: Path, spec: str, home: Path) -> tuple[str, str, dict[str, Any]]:
    """``trainops run`` of the example's ``spec``: its output, the job's name and description."""
    result = trainops("run", str(example / spec), home=home, timeout=900)
    out = result.stdout + result.stderr
    name = next(line.split()[-1] for line in result.stdout.splitlines() if "Submitted" in line)
    return out, name, describe(name, home)


def verdicts(description: dict[str, Any]) -> dict[str, str]:
    return {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
        for s in description["DebugRuleEvaluationStatuses"]
    }


def test_the_broken_model_is_stopped_early_by_a_rule(example: Path, home: Path) -> None:
    out, _, job = run(example, "job-broken.yaml", home)
    assert job["TrainingJobStatus"] == "Stopped", out
    found = verdicts(job)
    assert sorted(found) == sorted(RULES)
    assert set(found.values()) <= {"IssuesFound", "NoIssuesFound"}, found  # all final
    # N(0, 1) weights: the ReLUs' input variance grows ~100x from layer to layer (step 0), and
    # the first updates kill the ReLUs (step 5); PoorWeightInitialization only reports
    assert found["PoorWeightInitialization"] == "IssuesFound"
    assert found["DeadRelu"] == "IssuesFound"
    reasons = [t.get("StatusMessage", "") for t in job["SecondaryStatusTransitions"]]
    stopper = next(r for r in reasons if r.startswith("Stopped by rule ")).split()[3].rstrip(":")
    assert found[stopper] == "IssuesFound", reasons
    assert stopper != "PoorWeightInitialization"
    assert "Debugger rules:\n  PoorWeightInitialization: IssuesFound: variances of" in out
    assert "Action stop_training done" in out
    assert "epoch=30 " not in out  # stopped before its last epoch


def test_the_healthy_run_completes_with_every_rule_quiet(example: Path, home: Path) -> None:
    out, name, job = run(example, "job-healthy.yaml", home)
    assert job["TrainingJobStatus"] == "Completed", out
    assert verdicts(job) == dict.fromkeys(RULES, "NoIssuesFound"), out
    hook = job["DebugHookConfig"]
    assert hook["HookParameters"]["save_interval"] == "50"
    collections = {c["CollectionName"] for c in hook["CollectionConfigurations"]}
    assert {"gradients", "relu_input", "relu_output", "losses"} <= collections
    configured = {c["RuleConfigurationName"] for c in job["DebugRuleConfigurations"]}
    assert configured == set(RULES)
    metrics = {m["MetricName"]: m["Value"] for m in job["FinalMetricDataList"]}
    assert metrics["test_accuracy"] > 0.9  # chance is 0.1

    trial = create_trial(name, settings=Settings(home=home))
    train_steps = trial.steps(mode=modes.TRAIN)
    assert train_steps[:6] == [0, 5, 10, 20, 30, 50] and train_steps[-1] % 50 == 0
    assert len(trial.steps(mode=modes.EVAL)) == 30  # every test loss: one EVAL step per epoch
    gradient = trial.tensor("gradient/Net_fc1.weight").value(50, mode=modes.TRAIN)
    assert gradient.shape == (256, 64) and np.isfinite(gradient).all() and gradient.any()
    losses = trial.tensor("CrossEntropyLoss_output_0").values(mode=modes.EVAL)
    assert losses[29] < losses[0] / 4  # the test loss fell


def test_an_smdebug_script_runs_unchanged(example: Path, home: Path) -> None:
    out, name, job = run(example, "job-smdebug.yaml", home)
    assert job["TrainingJobStatus"] == "Completed", out
    assert "trainops.debugger:" not in out  # no hook failure, no second hook
    trial = create_trial(name, settings=Settings(home=home))
    train, evals = trial.steps(mode=modes.TRAIN), trial.steps(mode=modes.EVAL)
    assert f"trial: {len(train)} TRAIN and {len(evals)} EVAL steps" in out  # read in the job
    assert train[:2] == [0, 50] and len(evals) == 5
    weight = trial.tensor("Net_fc1.weight").value(0, mode=modes.TRAIN)
    assert weight.shape == (256, 64)
    assert "gradient/Net_fc3.bias" in trial.tensor_names(collection="gradients")
