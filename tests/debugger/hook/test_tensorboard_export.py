"""The hook's TensorBoard export on a small real model, read back by TensorBoard's own reader and
tbparse: histograms of the collections that ask for them, scalars of losses, reductions and
``save_scalar``, a run per mode, one file per saved step; turned on by the hook's arguments, by
the job's ``tensorboardoutputconfig.json``, and, through a real agent, synced to the job's
TensorBoard prefix."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing import event_accumulator

from tests._support.system import require_extra
from tests.agent._support import make_job
from tests.debugger.hook._support import Net, batch, train, write_config
from trainops.debugger import ReductionConfig, SaveConfig, SaveConfigMode, create_trial, modes
from trainops.debugger.exceptions import DebugConfigError, TensorUnavailableForStep
from trainops.debugger.hook import Hook
from trainops.protocol import HostOutcome

LOSS = "CrossEntropyLoss_output_0"


def _read(logdir: Path) -> event_accumulator.EventAccumulator:
    guidance = {"histograms": 0, "scalars": 0}
    accumulator = event_accumulator.EventAccumulator(str(logdir), size_guidance=guidance)
    accumulator.Reload()
    return accumulator


def _dense_hook(out: Path, **kwargs: Any) -> Hook:
    hook = Hook(
        str(out),
        save_config=SaveConfig(save_interval=2),
        include_collections=["weights", "gradients", "losses"],
        **kwargs,
    )
    # gradients as reductions only: their histograms are shown, their raw values not saved
    hook.get_collection("gradients").reduction_config = ReductionConfig(
        reductions=["mean"], abs_norms=["l2"]
    )
    return hook


def test_histograms_and_scalars_are_written_in_smdebugs_layout(tmp_path: Path) -> None:
    hook = _dense_hook(tmp_path / "tensors", export_tensorboard=True)
    seen = train(hook, 5)
    hook.save_scalar("lr", 0.1)
    hook.close()
    run = tmp_path / "tensors" / "tensorboard" / "GLOBAL"
    assert hook.tensorboard_dir == str(tmp_path / "tensors" / "tensorboard")
    assert sorted(p.name.split("_")[0] for p in run.iterdir()) == [f"{s:012d}" for s in (0, 2, 4)]
    found = _read(run)
    assert sorted(found.Tags()["histograms"]) == sorted(
        [f"weights/Net_{n}.weight" for n in ("fc1", "fc2")]
        + [f"gradients/gradient/Net_{n}.{p}" for n in ("fc1", "fc2") for p in ("weight", "bias")]
    )
    for step in (0, 2, 4):
        event = next(e for e in found.Histograms("weights/Net_fc1.weight") if e.step == step)
        weight = seen[step]["weight"]
        assert event.histogram_value.num == weight.size
        assert event.histogram_value.min == pytest.approx(weight.min())
        assert event.histogram_value.max == pytest.approx(weight.max())
        gradient = next(e for e in found.Histograms("gradients/gradient/Net_fc1.weight"))
        assert gradient.histogram_value.num == seen[0]["grad"].size
    losses = [(e.step, e.value) for e in found.Scalars(LOSS)]
    assert losses == [(s, pytest.approx(seen[s]["loss"], rel=1e-6)) for s in (0, 2, 4)]
    l2 = found.Scalars("smdebug/reductions/abs_l2/gradient/Net_fc1.weight")
    assert l2[0].value == pytest.approx(np.linalg.norm(seen[0]["grad"]), rel=1e-5)
    assert [(e.step, e.value) for e in found.Scalars("scalar/lr")] == [(4, pytest.approx(0.1))]
    gradient = create_trial(str(tmp_path / "tensors")).tensor("gradient/Net_fc1.weight")
    assert gradient.reduction_values(0)  # kept for its histogram, the raw value is not saved
    with pytest.raises(TensorUnavailableForStep, match="only reductions were saved"):
        gradient.value(0)


def test_each_mode_is_a_run_of_its_own_and_eval_has_no_gradients(tmp_path: Path) -> None:
    config = SaveConfig(
        mode_save_configs={
            modes.TRAIN: SaveConfigMode(save_interval=2),
            modes.EVAL: SaveConfigMode(save_interval=1),
        }
    )
    hook = Hook(str(tmp_path), tensorboard_dir=str(tmp_path / "tb"), save_config=config)
    hook.get_collection("weights")
    hook.include_collections.append("weights")
    net, criterion = Net(), torch.nn.CrossEntropyLoss()
    hook.register_module(net)
    hook.register_loss(criterion)
    hook.set_mode(modes.TRAIN)
    for step in range(3):
        criterion(net(batch(step)[0]), batch(step)[1]).backward()
    hook.set_mode(modes.EVAL)
    with torch.no_grad():
        criterion(net(batch(9)[0]), batch(9)[1])
    hook.close()
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == ["EVAL", "TRAIN"]
    train_run, eval_run = _read(tmp_path / "tb" / "TRAIN"), _read(tmp_path / "tb" / "EVAL")
    assert [e.step for e in train_run.Scalars(LOSS)] == [0, 2]  # global steps
    assert [e.step for e in eval_run.Scalars(LOSS)] == [3]
    assert "weights/Net_fc1.weight" in eval_run.Tags()["histograms"]
    assert not [t for t in eval_run.Tags()["histograms"] if t.startswith("gradients/")]


# tbparse 0.0.9 calls pandas' sort_values(inplace=True), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_tbparse_reads_the_hooks_files(tmp_path: Path) -> None:
    SummaryReader = require_extra("dev", "tbparse").SummaryReader

    hook = _dense_hook(tmp_path, export_tensorboard=True)
    seen = train(hook, 3)
    hook.close()
    reader = SummaryReader(str(tmp_path / "tensorboard"), extra_columns={"dir_name"})
    scalars = reader.scalars
    loss = scalars[scalars["tag"] == LOSS]
    assert list(loss["step"]) == [0, 2] and set(loss["dir_name"]) == {"GLOBAL"}
    assert list(loss["value"]) == pytest.approx([seen[0]["loss"], seen[2]["loss"]], rel=1e-6)
    assert "weights/Net_fc2.weight" in set(reader.histograms["tag"])


def test_no_tensorboard_files_unless_asked_or_in_dry_run(tmp_path: Path) -> None:
    quiet = Hook(str(tmp_path / "a"), save_config=SaveConfig(save_interval=1))
    train(quiet, 2)
    quiet.close()
    assert quiet.tensorboard_dir is None and not (tmp_path / "a" / "tensorboard").exists()
    dry = Hook(str(tmp_path / "b"), export_tensorboard=True, dry_run=True)
    train(dry, 2)
    dry.close()
    assert not (tmp_path / "b" / "tensorboard").exists()
    with pytest.raises(ValueError, match="tensorboard_dir must be a local directory"):
        Hook(str(tmp_path), tensorboard_dir="s3://bucket/tb")


def test_a_tensorboard_directory_that_cannot_be_written_stops_the_export_only(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the directory should be")
    hook = Hook(str(tmp_path / "t"), tensorboard_dir=str(blocker / "tb"))
    train(hook, 2)
    hook.close()
    err = [line for line in capfd.readouterr().err.splitlines() if "trainops.debugger" in line]
    assert len(err) == 1 and "TensorBoard export stopped" in err[0], err
    assert create_trial(str(tmp_path / "t")).steps() == [0]  # the tensors are saved all the same


def _tensorboard_config(folder: Path, local: object) -> Path:
    path = folder / "tensorboardoutputconfig.json"
    path.write_text(json.dumps({"LocalPath": local, "S3OutputPath": "s3://b/tb"}))
    return path


def test_the_jobs_tensorboard_config_turns_it_on_as_on_sagemaker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_dir = tmp_path / "config"
    hook_config = write_config(config_dir, tmp_path / "tensors", save_interval=1)
    monkeypatch.setenv("SM_INPUT_CONFIG_DIR", str(config_dir))
    monkeypatch.delenv("TENSORBOARD_CONFIG_FILE_PATH", raising=False)
    assert Hook.create_from_json_file(str(hook_config)).tensorboard_dir is None
    _tensorboard_config(config_dir, str(tmp_path / "tb"))  # beside the hook's config
    hook = Hook.create_from_json_file(str(hook_config))
    assert hook.tensorboard_dir == str(tmp_path / "tb") and hook.export_tensorboard
    train(hook, 1)
    hook.close()
    assert [e.step for e in _read(tmp_path / "tb" / "GLOBAL").Scalars(LOSS)] == [0]
    # the hook's own parameters win: off, or another directory
    off = write_config(tmp_path / "off", tmp_path / "t2", export_tensorboard="false")
    assert Hook.create_from_json_file(str(off)).tensorboard_dir is None
    other = write_config(tmp_path / "other", tmp_path / "t3", tensorboard_dir=str(tmp_path / "x"))
    assert Hook.create_from_json_file(str(other)).tensorboard_dir == str(tmp_path / "x")


@pytest.mark.parametrize("local", [None, "", 7, ["a"]])
def test_a_bad_tensorboard_config_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: object
) -> None:
    hook_config = write_config(tmp_path / "config", tmp_path / "tensors")
    bad = _tensorboard_config(tmp_path, local)
    monkeypatch.setenv("TENSORBOARD_CONFIG_FILE_PATH", str(bad))
    with pytest.raises(DebugConfigError, match=r"tensorboardoutputconfig\.json: LocalPath must be"):
        Hook.create_from_json_file(str(hook_config))
    bad.write_text("{not json")
    with pytest.raises(DebugConfigError, match="LocalPath must be"):
        Hook.create_from_json_file(str(hook_config))


LOOP = """
import torch
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
for i in range(0, 16, 4):
    optimizer.zero_grad()
    criterion(net(x[i:i + 4]), y[i:i + 4]).backward()
    optimizer.step()
"""


@pytest.mark.slow
def test_a_job_with_tensorboard_gets_the_hooks_histograms_in_its_prefix(tmp_path: Path) -> None:
    job = make_job(
        tmp_path,
        {"train.py": LOOP},
        tensorboard_output_config={},
        debugger_hook_config={
            "hook_parameters": {"save_interval": "2"},
            "collection_configs": [{"name": "weights"}],
        },
    )
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(job.agent().run()))
    runner.start()
    runner.join(timeout=300)
    assert results and results[0].outcome is HostOutcome.COMPLETED, job.reporter.lines()
    remote = job.object_path(job.assignment.output_prefix) / "tensorboard" / "TRAIN"
    found = _read(remote)
    assert [e.step for e in found.Scalars(LOSS)] == [0, 2]
    histograms = found.Histograms("weights/Sequential_0.weight")
    assert [e.step for e in histograms] == [0, 2] and histograms[0].histogram_value.num == 32
