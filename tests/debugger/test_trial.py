"""The trial reader over files written by TensorFileWriter: the smdebug API, live growth, ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainops.debugger import (
    CollectionManager,
    NoMoreData,
    StepNotYetAvailable,
    StepState,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
    create_trial,
    modes,
    no_refresh,
)
from trainops.debugger.config import Collection
from trainops.debugger.format import TensorFileWriter, mark_training_end, reduction_tensor_name


def write_run(out: Path, steps: int = 6, workers: int = 1) -> None:
    """Steps 0..steps-1: even ones TRAIN (mode step n//2), odd ones EVAL."""
    for rank in range(workers):
        writer = TensorFileWriter(out, f"worker_{rank}")
        manager = CollectionManager(
            [Collection("weights", ["fc.*"]), Collection("losses", ["loss"])]
        )
        writer.write_collections(manager, num_workers=workers)
        for step in range(steps):
            mode = modes.TRAIN if step % 2 == 0 else modes.EVAL
            weight = np.full((2, 3), step + rank, np.float32)
            tensors = [("fc.weight", weight), ("loss", np.float32(10 - step))]
            tensors.append((reduction_tensor_name("fc.weight", "max", True), np.float32(99)))
            writer.write_step(step, mode, step // 2, tensors)


def test_the_smdebug_api_on_a_finished_run(tmp_path: Path) -> None:
    write_run(tmp_path)
    mark_training_end(tmp_path)
    trial = create_trial(tmp_path)
    assert trial.tensor_names() == ["fc.weight", "loss"]
    assert trial.tensor_names(collection="weights") == ["fc.weight"]
    assert trial.tensor_names(regex="lo.*") == ["loss"]
    assert trial.steps() == [0, 1, 2, 3, 4, 5]
    assert trial.steps(modes.TRAIN) == [0, 1, 2] and trial.steps(modes.EVAL) == [0, 1, 2]
    assert trial.modes() == [modes.TRAIN, modes.EVAL]
    assert trial.mode(3) == modes.EVAL and trial.mode_step(3) == 1
    assert trial.global_step(modes.EVAL, 2) == 5
    assert trial.workers() == ["worker_0"]
    assert set(trial.collections()) == {"weights", "losses"}
    weight = trial.tensor("fc.weight")
    np.testing.assert_array_equal(weight.value(2, modes.EVAL), np.full((2, 3), 5))
    np.testing.assert_array_equal(weight.value(4), np.full((2, 3), 4))
    assert sorted(weight.values(modes.TRAIN)) == [0, 1, 2]
    assert weight.reduction_value(4, "max", abs=True) == 99  # the saved reduction
    assert weight.reduction_value(4, "mean") == 4  # computed from the raw value
    assert weight.reduction_values(4) == {("max", True): 99}
    assert weight.shape(4) == (2, 3) and weight.workers(4) == ["worker_0"]
    assert weight.prev_steps(4, 2) == [3, 4]
    assert float(trial.tensor("loss").value(1, modes.EVAL)) == 7


def test_missing_things_raise_smdebugs_exceptions(tmp_path: Path) -> None:
    write_run(tmp_path, steps=3)
    trial = create_trial(tmp_path)
    with pytest.raises(TensorUnavailable):
        trial.tensor("nope")
    with pytest.raises(StepNotYetAvailable):
        trial.tensor("loss").value(7)
    assert trial.has_passed_step(1) == StepState.AVAILABLE
    assert trial.has_passed_step(7) == StepState.NOT_YET_AVAILABLE
    TensorFileWriter(tmp_path, "worker_0").write_step(9, modes.GLOBAL, 9, [("other", np.zeros(1))])
    assert trial.has_passed_step(7) == StepState.UNAVAILABLE
    with pytest.raises(StepUnavailable):
        trial.tensor("loss").value(7)
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("loss").value(9)


def test_a_trial_sees_steps_as_they_arrive_and_then_the_end(tmp_path: Path) -> None:
    write_run(tmp_path, steps=2)
    trial = create_trial(tmp_path, poll_interval=0.01)
    trial.end_delay = 0.0
    assert trial.steps() == [0, 1]
    with no_refresh(trial):
        TensorFileWriter(tmp_path, "worker_0").write_step(2, modes.TRAIN, 1, [("loss", np.ones(1))])
        assert trial.steps() == [0, 1]
    assert trial.steps() == [0, 1, 2]
    trial.wait_for_steps([2])
    mark_training_end(tmp_path)
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([3])
    assert trial.loaded_all_steps


def test_a_step_is_complete_once_every_worker_wrote_it(tmp_path: Path) -> None:
    write_run(tmp_path, steps=2, workers=2)
    TensorFileWriter(tmp_path, "worker_0").write_step(2, modes.TRAIN, 1, [("loss", np.ones(1))])
    trial = create_trial(tmp_path)
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.steps() == [0, 1]
    assert trial.steps(show_incomplete_steps=True) == [0, 1, 2]
    np.testing.assert_array_equal(
        trial.tensor("fc.weight").value(1, worker="worker_1"), np.full((2, 3), 2)
    )
    TensorFileWriter(tmp_path, "worker_1").write_step(2, modes.TRAIN, 1, [("loss", np.ones(1))])
    assert trial.steps() == [0, 1, 2]
