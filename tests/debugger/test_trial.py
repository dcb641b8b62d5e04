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


def test_a_slow_workers_earlier_steps_are_not_skipped_by_the_listing(tmp_path: Path) -> None:
    write_run(tmp_path, steps=4, workers=1)
    (tmp_path / "collections/000000000/worker_0_collections.json").unlink()
    manager = CollectionManager([Collection("weights", ["fc.*"])])
    TensorFileWriter(tmp_path, "worker_0").write_collections(manager, num_workers=2)
    slow = TensorFileWriter(tmp_path, "worker_1")
    slow.write_step(0, modes.TRAIN, 0, [("loss", np.ones(1))])
    trial = create_trial(tmp_path)
    assert trial.steps() == [0]
    for step in (1, 2, 3):
        slow.write_step(step, modes.TRAIN, step, [("loss", np.ones(1))])
        assert trial.steps() == list(range(step + 1))
    assert trial.tensor("loss").workers(3) == ["worker_0", "worker_1"]


def test_steps_across_index_folders_arrive_in_order(tmp_path: Path) -> None:
    writer = TensorFileWriter(tmp_path, "worker_0")
    trial = create_trial(tmp_path)
    seen = []
    for step in (0, 999, 1000, 1500, 7000, 7001):
        writer.write_step(step, modes.TRAIN, step, [("loss", np.float32(step))])
        seen.append(step)
        assert trial.steps() == seen
    assert [float(v) for v in trial.tensor("loss").values().values()] == seen


def test_range_steps_keeps_only_the_steps_asked_for(tmp_path: Path) -> None:
    write_run(tmp_path, steps=6)
    assert create_trial(tmp_path, range_steps=(2, 5)).steps() == [2, 3, 4]
    assert create_trial(tmp_path, range_steps=(4, None)).steps() == [4, 5]


def test_too_many_incomplete_steps_mark_the_older_half_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW", "4")
    write_run(tmp_path, steps=7, workers=1)
    (tmp_path / "collections/000000000/worker_0_collections.json").unlink()
    TensorFileWriter(tmp_path, "worker_0").write_collections(CollectionManager(), num_workers=2)
    # worker_1 never writes: the fifth incomplete step goes over the window of 4, and the older
    # half of the five (0, 1, 2) counts as complete; 3 to 6 then stay within the window
    trial = create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2]
    assert trial.steps(show_incomplete_steps=True) == list(range(7))


def test_steps_read_before_the_collections_file_wait_for_every_worker(tmp_path: Path) -> None:
    first, second = TensorFileWriter(tmp_path, "worker_0"), TensorFileWriter(tmp_path, "worker_1")
    for step in range(3):
        first.write_step(step, modes.TRAIN, step, [("loss", np.ones(1))])
    trial = create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2]  # one worker, as far as the trial knows yet
    first.write_collections(CollectionManager(), num_workers=2)
    assert trial.steps() == []  # now it knows: none of them is complete
    for step in range(3):
        second.write_step(step, modes.TRAIN, step, [("loss", np.ones(1))])
    assert trial.steps() == [0, 1, 2]
    assert all(trial.tensor("loss").workers(s) == ["worker_0", "worker_1"] for s in range(3))


def test_forgetting_the_steps_a_reader_is_done_with(tmp_path: Path) -> None:
    """A live reader (the control plane's rules) drops the steps it evaluated: they are gone
    from every query, the later ones read as before, and the trial holds only those."""
    write_run(tmp_path, steps=6)
    trial = create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2, 3, 4, 5]
    held = trial.records_held
    assert held == 6 * 4  # 3 tensor records and the step, per step
    assert trial.forget_before(4) == 4 * 4
    assert trial.records_held == held - 16
    assert trial.steps(show_incomplete_steps=True) == [4, 5]
    assert trial.steps(modes.EVAL, show_incomplete_steps=True) == [2]  # global 5
    assert trial.tensor("fc.weight").value(4).tolist() == [[4.0] * 3] * 2
    assert trial.tensor("fc.weight").reduction_value(5, "max", abs=True) == 99
    with pytest.raises(StepUnavailable):
        trial.tensor("fc.weight").value(3)
    assert trial.has_passed_step(1) == StepState.UNAVAILABLE
    write_run(tmp_path, steps=8)  # the job goes on: the new steps arrive, the old stay gone
    assert trial.steps(show_incomplete_steps=True) == [4, 5, 6, 7]


def test_the_record_cap_is_a_window_for_a_reader_that_forgets(tmp_path: Path) -> None:
    """Over ``max_records`` a step is left out and named; once the reader forgets older steps,
    the later ones are read again (a job's files bound what the reader holds, not what it
    reads)."""
    from trainops.debugger.trial import TrialLimits

    write_run(tmp_path, steps=3)
    trial = create_trial(tmp_path, limits=TrialLimits(max_records=10))
    assert trial.steps(show_incomplete_steps=True) == [0, 1]
    assert trial.errors == [
        f"{tmp_path}: more than 10 records held; step 2 of worker_0 is left out"
    ]
    trial.forget_before(2)
    write_run(tmp_path, steps=5)
    assert trial.steps(show_incomplete_steps=True) == [3, 4]
    assert trial.records_held == 8
