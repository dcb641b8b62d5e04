"""The explicit hook on a small real model: each collection's contents, save schedules, modes,
reductions, scalars, custom tensors, the JSON config, and what a bad argument gets."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tests.debugger.hook._support import Net, batch, train, write_config
from trainops.debugger import ReductionConfig, SaveConfig, SaveConfigMode, create_trial, modes
from trainops.debugger.exceptions import DebugConfigError, TensorUnavailableForStep
from trainops.debugger.hook import Hook

COLLECTIONS = ["weights", "biases", "gradients", "losses", "outputs", "inputs"]


def test_each_collection_holds_what_smdebug_names_and_the_right_values(tmp_path: Path) -> None:
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=2), include_collections=COLLECTIONS
    )
    seen = train(hook, 5)
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 2, 4]
    names = set(trial.tensor_names())
    assert {"Net_fc1.weight", "Net_fc1.bias", "Net_fc2.weight", "Net_fc2.bias"} <= names
    assert {"gradient/Net_fc1.weight", "gradient/Net_fc2.bias"} <= names
    assert {"CrossEntropyLoss_output_0", "fc1_output_0", "relu_output_0", "Net_output_0"} <= names
    assert {"fc1_input_0", "CrossEntropyLoss_input_0", "CrossEntropyLoss_input_1"} <= names
    assert set(trial.tensor_names(collection="weights")) == {"Net_fc1.weight", "Net_fc2.weight"}
    assert set(trial.tensor_names(collection="losses")) == {"CrossEntropyLoss_output_0"}
    for step in (0, 2, 4):
        np.testing.assert_allclose(trial.tensor("Net_fc1.weight").value(step), seen[step]["weight"])
        np.testing.assert_allclose(
            trial.tensor("gradient/Net_fc1.weight").value(step), seen[step]["grad"]
        )
        loss = trial.tensor("CrossEntropyLoss_output_0").value(step)
        assert float(loss) == pytest.approx(seen[step]["loss"], rel=1e-6)
    np.testing.assert_allclose(trial.tensor("fc1_input_0").value(2), batch(2)[0].numpy())


def test_by_default_only_losses_are_saved_every_500_steps(tmp_path: Path) -> None:
    hook = Hook(str(tmp_path))
    train(hook, 3)
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0] and trial.tensor_names() == ["CrossEntropyLoss_output_0"]


def test_modes_count_their_own_steps_and_eval_saves_no_gradients(tmp_path: Path) -> None:
    config = SaveConfig(
        mode_save_configs={
            modes.TRAIN: SaveConfigMode(save_interval=2),
            modes.EVAL: SaveConfigMode(save_interval=1),
        }
    )
    hook = Hook(str(tmp_path), save_config=config, include_collections=["weights", "gradients"])
    net = Net()
    hook.register_module(net)
    hook.set_mode(modes.TRAIN)
    for _ in range(4):
        net(batch()[0]).sum().backward()
    hook.set_mode(modes.EVAL)
    with torch.no_grad():
        for _ in range(2):
            net(batch()[0])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps(mode=modes.TRAIN) == [0, 2]
    assert trial.steps(mode=modes.EVAL) == [0, 1]
    assert trial.steps() == [0, 2, 4, 5]
    assert trial.mode(4) == modes.EVAL and trial.mode_step(5) == 1
    assert trial.tensor("gradient/Net_fc1.weight").steps() == [0, 2]
    assert trial.tensor("Net_fc1.weight").steps(mode=modes.EVAL) == [0, 1]


def test_save_interval_with_start_step_saves_as_smdebug(tmp_path: Path) -> None:
    config = SaveConfig(save_interval=3, start_step=4, end_step=10)
    hook = Hook(str(tmp_path), save_config=config, include_collections=["weights"])
    hook.register_module(net := Net())
    for _ in range(12):
        net(batch()[0])
    hook.save_scalar("unused", 0.0)  # a scalar joins the step in progress (11)
    hook.close()
    assert create_trial(str(tmp_path)).steps() == [6, 9, 11]


def test_reductions_replace_the_raw_tensor_and_match_numpy(tmp_path: Path) -> None:
    reductions = ReductionConfig(reductions=["mean", "max", "variance"], abs_norms=["l2"])
    hook = Hook(str(tmp_path), reduction_config=reductions, include_collections=["weights"])
    seen = train(hook, 1)
    hook.close()
    trial = create_trial(str(tmp_path))
    tensor = trial.tensor("Net_fc1.weight")
    with pytest.raises(TensorUnavailableForStep):
        tensor.value(0)
    weight = seen[0]["weight"]
    expected = {
        ("mean", False): weight.mean(),
        ("max", False): weight.max(),
        ("variance", False): weight.var(),
        ("l2", True): np.linalg.norm(weight.ravel()),
    }
    for (name, absolute), value in expected.items():
        found = tensor.reduction_value(0, name, abs=absolute)
        assert float(found) == pytest.approx(float(value), rel=1e-5), name
    assert trial.tensor_names(collection="losses") == ["CrossEntropyLoss_output_0"]  # raw, always


def test_scalars_and_custom_tensors_join_the_step_in_progress(tmp_path: Path) -> None:
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1))
    hook.register_module(net := Net())
    hook.save_scalar("before", 1.0)  # before any step: joins step 0
    net(batch()[0])
    hook.save_scalar("accuracy", torch.tensor(0.75))
    hook.save_tensor("my_mask", torch.tensor([True, False]), "masks")
    net(batch()[0])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert float(trial.tensor("scalar/accuracy").value(0)) == 0.75
    assert float(trial.tensor("scalar/before").value(0)) == 1.0
    np.testing.assert_array_equal(trial.tensor("my_mask").value(0), [True, False])
    assert "my_mask" in trial.tensor_names(collection="masks")


def test_a_collection_by_module_type_gathers_relu_outputs(tmp_path: Path) -> None:
    hook = Hook(str(tmp_path), include_collections=["relu_output"])
    hook.register_module(
        net := nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2), nn.ReLU())
    )
    out = net(batch()[0])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert sorted(trial.tensor_names(collection="relu_output")) == ["1_output_0", "3_output_0"]
    np.testing.assert_allclose(trial.tensor("3_output_0").value(0), out.detach().numpy())


def test_the_json_config_sets_schedules_collections_and_reductions(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    config = write_config(
        tmp_path / "config",
        out,
        save_interval=4,
        **{"train.save_interval": 2},
        collections={
            "weights": {"save_interval": "3", "reductions": "mean,abs_l1_norm"},
            "gradients": {},
            "custom": {"include_regex": "fc2_output_.*"},
        },
    )
    hook = Hook.create_from_json_file(str(config))
    hook.register_module(net := Net())
    hook.set_mode(modes.TRAIN)
    for _ in range(7):
        net(batch()[0]).sum().backward()
    hook.close()
    trial = create_trial(str(out))
    assert trial.tensor("Net_fc1.weight").steps() == [0, 3, 6]
    assert trial.tensor("Net_fc1.weight").reduction_value(3, "l1", abs=True) > 0
    assert trial.tensor("gradient/Net_fc1.weight").steps() == [0, 2, 4, 6]
    assert trial.tensor("fc2_output_0").steps() == [0, 2, 4, 6]
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("Net_fc1.weight").value(0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda d: Hook(d, include_workers="two"), "include_workers must be 'one' or 'all'"),
        (lambda d: Hook(d).register_module("net"), "register_module takes a torch.nn.Module"),
        (lambda d: Hook(d).set_mode("training"), "mode 'training' is not one of"),
        (lambda d: Hook(d).save_scalar("x", [1.0, 2.0]), "must be a scalar"),
        (lambda d: Hook(d, save_config=1.5), "save_config must be a SaveConfig"),  # type: ignore[arg-type]
        (lambda d: Hook("s3://bucket/x"), "out_dir must be a local directory"),
    ],
)
def test_bad_arguments_get_one_clear_line(tmp_path: Path, call: object, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message) as caught:
        call(str(tmp_path))  # type: ignore[operator]
    assert "\n" not in str(caught.value)


def test_a_hostile_config_file_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "debughookconfig.json"
    for content in ("{", '{"HookParameters": {"save_interval": "-3"}}', "[1]", "x" * (2 << 20)):
        bad.write_text(content)
        with pytest.raises(DebugConfigError) as caught:
            Hook.create_from_json_file(str(bad))
        assert str(bad) in str(caught.value) and "\n" not in str(caught.value)


def test_a_write_that_fails_turns_the_hook_off_and_training_goes_on(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    hook = Hook(str(blocker / "out"), save_config=SaveConfig(save_interval=1))
    train(hook, 3)
    hook.close()
    lines = [line for line in capfd.readouterr().err.splitlines() if "trainops.debugger" in line]
    assert len(lines) == 1 and "saving tensors stopped" in lines[0]


def test_another_models_optimizer_does_not_switch_step_counting(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["weights"]
    )
    other, net = Net(), Net()
    other_optimizer = torch.optim.SGD(other.parameters(), lr=0.1)
    hook.register_module(net)
    for _ in range(2):
        other(batch()[0]).sum().backward()
        other_optimizer.step()  # before the registered model's first forward
        net(batch()[0])
    hook.close()
    assert "trainops.debugger" not in capfd.readouterr().err
    assert create_trial(str(tmp_path)).steps() == [0, 1]


def _forward_in_child(net: nn.Module) -> None:
    for _ in range(10):
        net(batch()[0])


def test_a_forked_child_saves_nothing_and_does_not_block(tmp_path: Path) -> None:
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["weights"]
    )
    hook.register_module(net := Net())
    net(batch()[0])
    child = multiprocessing.get_context("fork").Process(target=_forward_in_child, args=(net,))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == 0
    net(batch()[0])
    hook.close()
    assert create_trial(str(tmp_path)).steps() == [0, 1]


def test_every_reduction_and_its_absolute_variant_matches_numpy(tmp_path: Path) -> None:
    """The hook computes reductions on the tensor's device (torch); each of smdebug's, plain and
    absolute, equals NumPy's over the flattened tensor (population variance and std)."""
    names = ["min", "max", "mean", "std", "variance", "sum", "prod"]
    reductions = ReductionConfig(
        reductions=names, abs_reductions=names, norms=["l1", "l2"], abs_norms=["l1", "l2"]
    )
    hook = Hook(str(tmp_path), reduction_config=reductions, include_collections=["biases"])
    train(hook, 1)
    hook.close()
    tensor = create_trial(str(tmp_path)).tensor("Net_fc2.bias")
    torch.manual_seed(0)
    bias = Net().fc2.bias.detach().numpy().astype(np.float64)  # as train() made it, step 0
    numpy = {
        "min": np.min,
        "max": np.max,
        "mean": np.mean,
        "std": np.std,
        "variance": np.var,
        "sum": np.sum,
        "prod": np.prod,
        "l1": lambda a: np.linalg.norm(a, 1),
        "l2": lambda a: np.linalg.norm(a, 2),
    }
    for name, reduce in numpy.items():
        for absolute in (False, True):
            expected = float(reduce(np.abs(bias) if absolute else bias))
            found = float(tensor.reduction_value(0, name, abs=absolute))
            assert found == pytest.approx(expected, rel=1e-5, abs=1e-12), (name, absolute)
    assert len(tensor.reduction_values(0)) == 2 * len(numpy)


def test_predict_mode_counts_its_own_steps(tmp_path: Path) -> None:
    hook = Hook(
        str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["weights"]
    )
    net = Net()
    hook.register_module(net)
    hook.set_mode(modes.TRAIN)
    net(batch()[0])
    hook.set_mode(modes.PREDICT)
    with torch.no_grad():
        for _ in range(3):
            net(batch()[0])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps(mode=modes.PREDICT) == [0, 1, 2]
    assert trial.steps(mode=modes.TRAIN) == [0]
    assert trial.mode(3) == modes.PREDICT and trial.mode_step(3) == 2
    assert trial.global_step(modes.PREDICT, 1) == 2
