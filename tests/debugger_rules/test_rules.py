"""The built-in debugger rules' semantics beyond the conformance suite: smdebug's own examples,
edges, and hostile tensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.debugger_rules._series import Series, write_series
from trainops.debugger import ModeKeys, RuleEvaluationConditionMet, create_trial
from trainops.debugger.rules import (
    ISSUES_FOUND,
    ClassImbalance,
    Confusion,
    LossNotDecreasing,
    RuleRunner,
    VanishingGradient,
    WeightUpdateRatio,
    invoke_rule,
    make_debugger_rule,
)


@pytest.fixture(autouse=True)
def _ended_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")


def _trial(path: Path, series: Series) -> object:
    return create_trial(write_series(path, series))


def _losses_every_4(values: list[float]) -> Series:
    series = Series()
    for index, value in enumerate(values):
        series.add(4 * index, loss=np.float32(value))
    return series


def test_loss_not_decreasing_checks_every_num_steps_as_smdebug(tmp_path: Path) -> None:
    """smdebug's test: losses saved every 4 steps, num_steps 10: step 12 is compared with step 0
    (0.30 against 0.3: not decreased); from step 13 on, step 16 with step 4 (0.28 < 0.33)."""
    trial = _trial(tmp_path, _losses_every_4([0.3, 0.33, 0.31, 0.30, 0.28]))
    with pytest.raises(RuleEvaluationConditionMet) as caught:
        invoke_rule(LossNotDecreasing(trial, diff_percent=0), 0, 17, raise_eval_cond=True)
    assert caught.value.step == 12
    invoke_rule(LossNotDecreasing(trial, diff_percent=0), 13, 17, raise_eval_cond=True)


def test_loss_not_decreasing_fires_on_a_loss_that_rises(tmp_path: Path) -> None:
    trial = _trial(tmp_path, _losses_every_4([0.3, 0.3, 0.5]))
    rule = LossNotDecreasing(trial, num_steps=4, diff_percent=-100)  # only a rise can fire
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(rule, raise_eval_cond=True)
    assert "rose" in rule.details


def test_loss_not_decreasing_prefers_eval_losses(tmp_path: Path) -> None:
    series = Series()
    for step in range(12):  # training loss flat, validation loss falling
        series.add(2 * step, ModeKeys.TRAIN, step, loss=np.float32(1.0))
        series.add(2 * step + 1, ModeKeys.EVAL, step, loss=np.float32(1.0 / (1 + step)))
    trial = _trial(tmp_path, series)
    invoke_rule(LossNotDecreasing(trial), raise_eval_cond=True)  # EVAL falls: quiet
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(LossNotDecreasing(trial, mode="TRAIN"), raise_eval_cond=True)


def test_confusion_reads_labels_from_collections(tmp_path: Path) -> None:
    """smdebug's test: labels and predictions found through their collections."""
    series = Series().add(0, y=np.arange(10), y_hat=np.arange(10))
    collections = {"labels": ["^y$"], "preds": ["^y_hat$"]}
    trial = create_trial(write_series(tmp_path, series, collections=collections))
    invoke_rule(
        Confusion(trial, labels_collection="labels", predictions_collection="preds"),
        raise_eval_cond=True,
    )


def test_confusion_fires_on_one_condition_alone(tmp_path: Path) -> None:
    predictions = np.arange(10)
    predictions[4] = 7
    trial = _trial(tmp_path, Series().add(1, labels=np.arange(10), predictions=predictions))
    rule = Confusion(trial, 10, min_diag=0.0, max_off_diag=0.01)
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(rule, 1, 2, raise_eval_cond=True)
    assert "class 4" in rule.details and "as class 7" in rule.details


def test_class_imbalance_counts_across_steps_until_samples(tmp_path: Path) -> None:
    series = Series()
    for step in range(4):  # 250 labels a step; the imbalance shows from 500 on
        labels = np.zeros(250, dtype=np.int64)
        labels[:5] = 1
        series.add(step, labels=labels, predictions=labels)
    trial = _trial(tmp_path, series)
    with pytest.raises(RuleEvaluationConditionMet) as caught:
        invoke_rule(ClassImbalance(trial), raise_eval_cond=True)
    assert caught.value.step == 1


def test_class_imbalance_fires_on_mispredictions(tmp_path: Path) -> None:
    labels = np.arange(600) % 2
    predictions = np.zeros(600, dtype=np.int64)  # class 1 always wrong
    trial = _trial(tmp_path, Series().add(0, labels=labels, predictions=predictions))
    rule = ClassImbalance(trial)
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(rule, raise_eval_cond=True)
    assert "class 1 is mispredicted" in rule.details


def test_weight_update_ratio_fires_on_a_huge_update(tmp_path: Path) -> None:
    series = Series().add(0, **{"fc.weight": np.ones(4)}).add(1, **{"fc.weight": np.ones(4) * 100})
    rule = WeightUpdateRatio(_trial(tmp_path, series))
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(rule, raise_eval_cond=True)
    assert "too large" in rule.details


def test_weight_update_ratio_needs_consecutive_steps(tmp_path: Path) -> None:
    series = Series().add(0, **{"fc.weight": np.ones(4)}).add(2, **{"fc.weight": np.ones(4)})
    invoke_rule(WeightUpdateRatio(_trial(tmp_path, series)), raise_eval_cond=True)


def test_vanishing_gradient_reads_saved_reductions_without_the_raw_tensor(tmp_path: Path) -> None:
    """A hook that saves only reductions (save_raw_tensor false) still feeds the rule."""
    series = Series().add(0, **{"smdebug/reductions/abs_mean/gradient/fc.weight": np.float32(1e-9)})
    trial = _trial(tmp_path, series)
    names = trial.tensor_names()  # type: ignore[attr-defined]
    if "gradient/fc.weight" not in names:
        pytest.skip("this reader keeps reductions under their own names")
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(VanishingGradient(trial), raise_eval_cond=True)


@pytest.mark.parametrize(
    ("rule", "parameters", "message"),
    [
        (
            "VanishingGradient",
            {"threshold": "lots"},
            "VanishingGradient.threshold must be a finite number",
        ),
        (
            "VanishingGradient",
            {"threshold": "nan"},
            "VanishingGradient.threshold must be a finite number",
        ),
        (
            "UnchangedTensor",
            {"num_steps": "1"},
            "UnchangedTensor.num_steps must be a whole number of 2",
        ),
        (
            "DeadRelu",
            {"tensor_regex": "(["},
            "DeadRelu.tensor_regex: '\\(\\[' is not a regular expression",
        ),
        (
            "ExplodingTensor",
            {"only_nan": "perhaps"},
            "ExplodingTensor.only_nan must be true or false",
        ),
        (
            "NLPSequenceRatio",
            {"token_values": "0,1", "token_thresholds_percent": "1,2,3"},
            "one per token",
        ),
        ("SimilarAcrossRuns", {}, "SimilarAcrossRuns needs other_trials"),
    ],
)
def test_bad_parameters_are_one_line_errors(
    rule: str, parameters: dict[str, str], message: str, tmp_path: Path
) -> None:
    trial = _trial(tmp_path, Series().add(0, loss=np.float32(1)))
    with pytest.raises(ValueError, match=message) as caught:
        make_debugger_rule(rule, trial, parameters)
    assert "\n" not in str(caught.value)


def test_hostile_class_ids_are_refused_not_allocated(tmp_path: Path) -> None:
    """A label of 10^12 would make a confusion matrix of 10^24 cells: refused."""
    labels = np.array([0, 10**12], dtype=np.int64)
    trial = _trial(tmp_path, Series().add(0, labels=labels, predictions=labels))
    runner = RuleRunner(Confusion(trial))
    with pytest.raises(ValueError, match="class id outside"):
        runner.advance(0.0)


def test_a_runner_sees_steps_as_they_arrive(tmp_path: Path) -> None:
    """A trial on a run that is still writing: the runner evaluates each new step once."""
    healthy = Series()
    for step in range(3):
        healthy.add(step, **{"gradient/fc.weight": np.full((4, 4), 0.1)})
    write_series(tmp_path, healthy, end=False)
    runner = RuleRunner(VanishingGradient(create_trial(tmp_path)))
    assert runner.advance(0.0).status == "InProgress"
    assert runner.evaluated == 3
    vanished = Series().add(3, **{"gradient/fc.weight": np.full((4, 4), 1e-12)})
    write_series(tmp_path, vanished, end=False)
    verdict = runner.advance(1.0)
    assert verdict.status == ISSUES_FOUND and verdict.step == 3
    assert runner.evaluated == 4


def test_a_runner_bounds_the_steps_of_one_advance(tmp_path: Path) -> None:
    from trainops.debugger.rules._invoker import STEPS_PER_ADVANCE

    series = Series()
    for step in range(STEPS_PER_ADVANCE + 5):
        series.add(step, loss=np.float32(1.0 / (1 + step)))
    runner = RuleRunner(LossNotDecreasing(_trial(tmp_path, series)))
    assert runner.advance(0.0, ended=True).status == "InProgress"
    assert runner.evaluated == STEPS_PER_ADVANCE
    assert runner.advance(0.0, ended=True).status == "NoIssuesFound"


def _named_layers(**tensors: np.ndarray) -> tuple[Series, dict[str, list[str]]]:
    """Activations of modules named ``relu1``, ``relu2``, ``act`` (no type in the name), with
    the collections the hook writes for them (by module type)."""
    series = Series().add(0, **tensors)
    collections = {
        "relu_input": [r"^relu1_input_\d+$", r"^relu2_input_\d+$"],
        "relu_output": [r"^relu1_output_\d+$", r"^relu2_output_\d+$"],
        "sigmoid_input": [r"^act_input_\d+$"],
    }
    return series, collections


def test_activation_rules_read_the_hooks_collections_by_module_type(tmp_path: Path) -> None:
    """``.*relu_output`` does not match ``relu2_output_0`` (a module named ``relu2``): the
    default regexes also take the hook's ``relu_output`` / ``relu_input`` collections."""
    rng = np.random.default_rng(0)
    series, collections = _named_layers(
        relu1_input_0=rng.standard_normal((32, 16)),
        relu2_input_0=rng.standard_normal((32, 16)) * 100,  # variance 10^4 times relu1's
        relu1_output_0=np.abs(rng.standard_normal((32, 16))),
        relu2_output_0=np.zeros((32, 16)),  # dead
    )
    trial = create_trial(write_series(tmp_path, series, collections=collections))
    for rule, expected in [
        ("DeadRelu", "relu2_output_0 are dead"),
        ("PoorWeightInitialization", "differ"),
    ]:
        found = make_debugger_rule(rule, trial)
        with pytest.raises(RuleEvaluationConditionMet):
            invoke_rule(found, raise_eval_cond=True)
        assert expected in found.details
    invoke_rule(
        make_debugger_rule("DeadRelu", trial, {"tensor_regex": ".*relu1.*"}), raise_eval_cond=True
    )


def test_saturated_activation_uses_the_sigmoid_range_for_the_sigmoid_collection(
    tmp_path: Path,
) -> None:
    """An input of 12 saturates a tanh (``squash``), not a sigmoid (``act``: its range reaches
    17), whatever the modules' names say."""
    series, collections = _named_layers(
        act_input_0=np.full((32, 16), 12.0), squash_input_0=np.full((32, 16), 12.0)
    )
    collections["tanh_input"] = [r"^squash_input_\d+$"]
    trial = create_trial(write_series(tmp_path, series, collections=collections))
    rule = make_debugger_rule("SaturatedActivation", trial)
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(rule, raise_eval_cond=True)
    assert "nodes of squash_input_0 are saturated" in rule.details
    only_act = make_debugger_rule("SaturatedActivation", trial, {"tensor_regex": "act.*"})
    invoke_rule(only_act, raise_eval_cond=True)


def test_activation_rules_read_by_name_where_the_trial_has_no_collections(tmp_path: Path) -> None:
    """A collections file the reader refuses (a catastrophic regex) leaves the trial without
    collections: DeadRelu still reads the tensors its regex names."""
    series = Series().add(0, layer_relu_output=np.zeros((8, 4)))
    write_series(tmp_path, series, collections={"relu_output": ["(a+)+$"]})
    trial = create_trial(tmp_path)
    rule = make_debugger_rule("DeadRelu", trial)
    with pytest.raises(RuleEvaluationConditionMet):
        invoke_rule(rule, raise_eval_cond=True)
    assert "layer_relu_output" in rule.details and trial.errors


def _forge_shape(event_file: Path) -> None:
    """Rewrite the first (4, 4) tensor of ``event_file`` to claim (127, 4): its content no
    longer fits its shape (a job's forged file; the record's framing stays valid)."""
    data = event_file.read_bytes()
    dim = b"\x12\x02\x08\x04"  # TensorShapeProto.dim { size: 4 }
    assert dim in data
    event_file.write_bytes(data.replace(dim, b"\x12\x02\x08\x7f", 1))


def test_a_forged_tensor_is_left_out_and_named_not_a_failure(tmp_path: Path) -> None:
    """A job's forged event file does not fail its rule: the unreadable tensor is left out, the
    other tensors and steps are evaluated, and the verdict names what could not be read."""
    series = Series()
    for step in range(3):
        series.add(step, **{"gradient/fc.weight": np.full((4, 4), 0.1)})
    series.add(3, **{"gradient/fc.weight": np.full((4, 4), 1e-12)})
    write_series(tmp_path, series, end=False)
    _forge_shape(tmp_path / "events" / f"{1:012d}" / f"{1:012d}_worker_0.tfevents")
    runner = RuleRunner(VanishingGradient(create_trial(tmp_path)))
    verdict = runner.advance(0.0)
    assert verdict.status == ISSUES_FOUND and verdict.step == 3  # step 3 still read
    quiet = RuleRunner(VanishingGradient(create_trial(tmp_path), threshold="1e-13"))
    verdict = quiet.advance(0.0)
    assert verdict.status == "InProgress", verdict
    assert quiet.evaluated == 4
    assert " tensor reads failed (first: DebugFormatError: " in verdict.details
    assert "000000000001_worker_0.tfevents" in verdict.details
    assert "\n" not in verdict.details


def test_a_missing_collections_file_leaves_steps_out_with_one_line(tmp_path: Path) -> None:
    """A rule reading a collection of a trial whose collections file is missing (or was
    refused) leaves its steps out and says why, instead of failing at every step."""
    series = Series()
    for step in range(3):
        series.add(step, **{"fc.weight": np.full((4, 4), 1.0 + step)})
    write_series(tmp_path, series)
    for found in (tmp_path / "collections").rglob("*.json"):
        found.unlink()
    runner = RuleRunner(WeightUpdateRatio(create_trial(tmp_path)))
    verdict = runner.advance(0.0, ended=True)
    assert verdict.status == "NoIssuesFound", verdict
    assert runner.evaluated == 1 and runner.left_out == 2  # step 0 has no update to read
    assert "2 steps left out (first: MissingCollectionFiles: " in verdict.details
