"""No code change: a plain PyTorch loop run as a job's script, with a debugger hook config in the
host's tree, saves its tensors; a smdebug-style script runs unchanged against trainops'
``smdebug``; a script without the config, or without torch, is untouched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.debugger.hook._support import SRC, run_job_script, write_config
from trainops.debugger import create_trial, modes

LOOP = """
import torch
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
for epoch in range(2):
    net.train()
    for i in range(0, 16, 4):
        optimizer.zero_grad()
        loss = criterion(net(x[i:i + 4]), y[i:i + 4])
        loss.backward()
        optimizer.step()
    net.eval()
    with torch.no_grad():
        criterion(net(x), y)
print("done")
"""

SMDEBUG_SCRIPT = """
import torch
from torch import nn
import smdebug.pytorch as smd
from smdebug.trials import create_trial
from smdebug import modes

net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
hook = smd.Hook.create_from_json_file()
hook.register_hook(net)
hook.register_loss(criterion)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
hook.set_mode(smd.modes.TRAIN)
for i in range(0, 16, 4):
    optimizer.zero_grad()
    loss = criterion(net(x[i:i + 4]), y[i:i + 4])
    loss.backward()
    optimizer.step()
hook.set_mode(smd.modes.EVAL)
with torch.no_grad():
    criterion(net(x), y)
hook.close()
trial = create_trial(hook.out_dir)
print(smd.__name__, type(hook).__module__)
print(trial.steps(mode=modes.TRAIN), trial.steps(mode=modes.EVAL))
"""


def test_a_plain_loop_is_saved_with_train_and_eval_told_apart(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    config_dir = write_config(
        tmp_path / "config", out, save_interval=1, collections={"weights": {}, "gradients": {}}
    ).parent
    result = run_job_script(tmp_path, LOOP, config_dir)
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr
    assert "trainops.debugger" not in result.stderr
    trial = create_trial(str(out))
    assert trial.steps(mode=modes.TRAIN) == list(range(8))
    assert trial.steps(mode=modes.EVAL) == [0, 1]
    assert trial.steps() == list(range(10))
    names = set(trial.tensor_names())
    assert {
        "Sequential_0.weight",
        "gradient/Sequential_2.bias",
        "CrossEntropyLoss_output_0",
    } <= names
    assert trial.tensor("gradient/Sequential_0.weight").steps() == [0, 1, 2, 3, 5, 6, 7, 8]
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == list(range(10))  # first call too
    assert (out / "training_job_end.ts").is_file()


@pytest.fixture(scope="module")
def torch_only_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job's own interpreter, as the server's images setting maps one: torch and numpy, but
    neither trainops nor google_crc32c (a venv whose site-packages shows only the others)."""
    import torch

    root = tmp_path_factory.mktemp("torch-only")
    shown = root / "packages"
    shown.mkdir()
    for entry in Path(torch.__file__).parents[1].iterdir():
        name = entry.name.lower()
        hidden = name.startswith(("trainops", "__editable__", "google_crc32c", "__pycache__"))
        if not hidden and not name.endswith(".pth"):
            (shown / entry.name).symlink_to(entry)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "shown.pth").write_text(f"{shown}\n")
    return python


@pytest.mark.slow
def test_the_hooks_run_in_a_job_s_own_interpreter_without_trainops(
    tmp_path: Path, torch_only_python: Path
) -> None:
    """The bootstrap loads its own package by its path (none of the server's others): the
    debugger hook saves (its CRC32C in Python) and the step timing runs, where they were off
    ("No module named 'trainops'") and every rule said NoIssuesFound of no step at all."""
    out = tmp_path / "tensors"
    config_dir = write_config(tmp_path / "config", out, save_interval=1).parent
    code = LOOP + (
        "import importlib.util, sys\n"
        "print(importlib.util.find_spec('google_crc32c') is None, sys.modules['trainops'].__file__)\n"
    )
    profiled = tmp_path / "profiler"
    result = run_job_script(
        tmp_path, code, config_dir, python=torch_only_python,
        env={"TRAINOPS_PROFILER_DIR": str(profiled)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    done, found = result.stdout.strip().splitlines()
    assert done == "done" and found == f"True {SRC / 'trainops' / '__init__.py'}"
    assert "off in this process" not in result.stderr, result.stderr
    trial = create_trial(str(out))
    assert trial.steps(mode=modes.TRAIN) == list(range(8))
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == list(range(10))
    # a smdebug-style script imports smdebug before torch: trainops' smdebug finds trainops too
    code = "import smdebug.pytorch as smd\nprint(smd.__name__, smd.Hook.__module__)\n"
    imported = run_job_script(tmp_path, code, config_dir, python=torch_only_python)
    assert imported.stdout.split() == ["smdebug.pytorch", "trainops.debugger.hook._hook"], (
        imported.stderr
    )


def test_a_smdebug_script_runs_unchanged_on_trainops(tmp_path: Path) -> None:
    out = tmp_path / "tensors"
    config_dir = write_config(tmp_path / "config", out, save_interval=2).parent
    result = run_job_script(tmp_path, SMDEBUG_SCRIPT, config_dir)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.strip().splitlines()
    assert first == "smdebug.pytorch trainops.debugger.hook._hook"
    assert second == "[0, 2] [0]"  # one hook: the automatic one stood down


def test_a_real_smdebug_on_the_path_wins_over_trainops(tmp_path: Path) -> None:
    real = tmp_path / "site" / "smdebug"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("WHO = 'the real one'\n")
    config_dir = write_config(tmp_path / "config", tmp_path / "tensors").parent
    code = "import smdebug\nprint(getattr(smdebug, 'WHO', smdebug.__file__))\n"
    result = run_job_script(tmp_path, code, config_dir, extra_path=[tmp_path / "site"])
    assert result.stdout.strip() == "the real one", result.stderr
    plain = run_job_script(tmp_path, code, config_dir)
    assert plain.stdout.strip().endswith("_compat/smdebug/__init__.py"), plain.stderr


def test_a_broken_config_leaves_the_script_running_with_one_line(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "debughookconfig.json").write_text('{"HookParameters": {"save_interval": "0"}}')
    result = run_job_script(tmp_path, LOOP, config_dir)
    assert result.returncode == 0 and result.stdout.strip() == "done"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("trainops.debugger: the hook is off"), lines


@pytest.mark.parametrize("with_config", [False, True])
def test_without_torch_nothing_of_trainops_is_loaded(tmp_path: Path, with_config: bool) -> None:
    config_dir = tmp_path / "config"
    if with_config:
        write_config(config_dir, tmp_path / "tensors")
    code = "import sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'trainops', 'smdebug')))\n"
    result = run_job_script(tmp_path, code, config_dir)
    assert result.stdout.strip() == "[]" and result.stderr == ""
    assert not (tmp_path / "tensors").exists()
