"""torch.compile (no added graph break; what the graph hides is named in one line) and DDP
across two gloo ranks on CPU (each rank's files, or rank 0's only)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from tests.debugger.hook._support import Net, batch, train
from trainops.debugger import SaveConfig, create_trial
from trainops.debugger.hook import Hook
from trainops.profiler._bootstrap import BOOTSTRAP_DIR, YIELD_AT_EXIT_ENV


def _breaks(model: Any) -> int:
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(batch()[0])
    return int(explained.graph_break_count)


@pytest.mark.slow
def test_compiled_model_adds_no_graph_break_and_names_what_it_hides(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    plain = Net()
    baseline = _breaks(torch.compile(Net(), backend="aot_eager"))
    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "outputs"],
    )
    compiled = torch.compile(plain, backend="aot_eager")
    seen = train(hook, 2, model=compiled)  # type: ignore[arg-type]
    assert _breaks(compiled) == baseline
    hook.close()
    err = [line for line in capfd.readouterr().err.splitlines() if "trainops.debugger" in line]
    assert len(err) == 1 and "Net is compiled" in err[0] and "fc1_output_0" in err[0], err
    trial = create_trial(str(tmp_path))
    names = set(trial.tensor_names())
    assert {"Net_fc1.weight", "gradient/Net_fc2.weight", "CrossEntropyLoss_output_0"} <= names
    assert "Net_output_0" in names and "fc1_output_0" not in names
    np.testing.assert_allclose(
        trial.tensor("gradient/Net_fc1.weight").value(1), seen[1]["grad"], rtol=1e-5
    )


@pytest.mark.slow
def test_a_hook_on_the_plain_model_adds_no_graph_break_when_it_is_compiled(tmp_path: Path) -> None:
    baseline = _breaks(torch.compile(Net(), backend="aot_eager"))
    net = Net()
    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["all"])
    hook.register_module(net)
    assert _breaks(torch.compile(net, backend="aot_eager")) == baseline
    hook.close()


@pytest.mark.slow
def test_a_model_compiled_after_registering_is_counted_at_optimizer_steps_and_said_so(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    hook = Hook(
        str(tmp_path),
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "outputs"],
    )
    seen = train(hook, 3, compile_after=True)
    hook.close()
    err = [line for line in capfd.readouterr().err.splitlines() if "trainops.debugger" in line]
    assert len(err) == 1 and "counted at optimizer steps" in err[0], err
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2]
    for step in (0, 1, 2):
        np.testing.assert_allclose(trial.tensor("Net_fc1.weight").value(step), seen[step]["weight"])
        np.testing.assert_allclose(
            trial.tensor("gradient/Net_fc1.weight").value(step), seen[step]["grad"], rtol=1e-5
        )
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == [1, 2]  # the first is unseen


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, port: int, out_dir: str, include_workers: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(Net())
        hook = Hook(
            out_dir,
            save_config=SaveConfig(save_interval=1),
            include_collections=["weights", "gradients"],
            include_workers=include_workers,
        )
        train(hook, 2, model=model)
        hook.close()
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize(("include_workers", "workers"), [("all", 2), ("one", 1)])
def test_ddp_ranks_write_as_smdebug_names_them(
    tmp_path: Path, include_workers: str, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ranks start as a job's processes of several do: with the bootstrap's pause at exit,
    # without which gloo aborts a rank that has done its work (profiler/_bootstrap).
    path = [str(BOOTSTRAP_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    monkeypatch.setenv(YIELD_AT_EXIT_ENV, "1")
    mp.start_processes(  # type: ignore[attr-defined]
        _rank, args=(_free_port(), str(tmp_path), include_workers), nprocs=2, start_method="spawn"
    )
    expected = [f"worker_{i}" for i in range(workers)]
    trial = create_trial(str(tmp_path))
    assert sorted(trial.workers()) == expected
    assert trial.steps() == [0, 1]
    assert "Net_fc1.weight" in trial.tensor_names()  # the model inside DDP names the tensors
    files = sorted(p.name for p in (tmp_path / "collections" / "000000000").iterdir())
    assert files == [f"{w}_collections.json" for w in expected]
    meta = json.loads((tmp_path / "collections" / "000000000" / files[0]).read_text())["_meta"]
    assert meta["num_workers"] == workers
    assert sorted(trial.tensor("gradient/Net_fc1.weight").workers(0)) == expected
