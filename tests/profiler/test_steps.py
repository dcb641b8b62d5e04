"""Step timing of real PyTorch loops with no code change, the one-line API, and what must not
change: a script without torch, a user's sitecustomize, a bad settings file."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.profiler._support import (
    environment,
    optimizer_steps,
    rows,
    run_script,
    series,
    settings,
    train,
)
from trainops.profiler import MODE_EVAL, MODE_TRAIN, STEP_COLUMNS
from trainops.profiler._bootstrap import BOOTSTRAP_DIR

PHASES = ("data", "forward", "backward", "optimizer")


def _split(found: list[dict[str, float]]) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    return [r for r in found if r["mode"] == MODE_TRAIN], [
        r for r in found if r["mode"] == MODE_EVAL
    ]


@pytest.mark.parametrize(("workers", "start_method"), [(0, None), (2, "fork"), (2, "spawn")])
def test_the_common_loop_gives_one_row_per_optimizer_step(
    tmp_path: Path, workers: int, start_method: str | None
) -> None:
    knobs: dict[str, object] = {"items": 96, "batch": 8, "workers": workers, "eval_batch": 32}
    knobs.update(sleep=0.002, start_method=start_method)
    root, result = train(tmp_path, knobs)
    found = series(root, "steps")
    assert found.columns == list(STEP_COLUMNS)
    train_rows, eval_rows = _split(rows(found))
    assert len(train_rows) == optimizer_steps(result.stdout) == 12
    assert [r["step"] for r in train_rows] == list(range(12))  # no worker wrote a row
    for row in train_rows:
        assert row["samples"] == 8
        assert all(row[p] >= 0 for p in PHASES), row
        assert sum(row[p] for p in PHASES) <= row["duration"] + 1e-9, row
        assert row["backward"] >= 0.002  # the sleep between backward() and step()
    assert [r["step"] for r in eval_rows] == [0, 1, 2]
    for row in eval_rows:
        assert row["samples"] == 32 and row["forward"] > 0 and row["data"] >= 0
        assert math.isnan(row["backward"]) and math.isnan(row["optimizer"])
        assert row["data"] + row["forward"] <= row["duration"] + 1e-9
    times = found.times
    assert times == sorted(times) and all(t > 1.7e9 for t in times)
    assert sorted(p.name for p in (root / "framework" / "steps" / "algo-1").iterdir()) == ["rank-0"]


def test_a_script_that_never_imports_torch_is_untouched(tmp_path: Path) -> None:
    code = "import sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'trainops')))\n"
    root = tmp_path / "profiler"
    result = run_script(tmp_path, code, environment(root, settings()))
    assert result.stdout.strip() == "[]" and result.stderr == ""
    assert not root.exists()


def test_without_the_directory_the_hooks_are_not_installed(tmp_path: Path) -> None:
    code = (
        "import sys, torch\nfrom trainops.profiler import step\nwith step():\n    pass\n"
        "print('trainops.profiler._torch_hooks' in sys.modules)\n"
    )
    result = run_script(tmp_path, code, environment(None))
    assert result.stdout.strip() == "False"
    assert not (tmp_path / "profiler").exists()


def test_a_users_sitecustomize_still_runs(tmp_path: Path) -> None:
    mine = tmp_path / "user-site"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text("import os\nMARK = os.getpid()\n")
    code = (
        "import os, sys, sitecustomize, torch\n"
        "assert sitecustomize.MARK == os.getpid(), 'not the user module'\n"
        "m = torch.nn.Linear(2, 2); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(3):\n    m(torch.ones(4, 2)).sum().backward(); o.step()\n"
        "print('ok')\n"
    )
    root = tmp_path / "profiler"
    result = run_script(tmp_path, code, environment(root, settings(), PYTHONPATH=str(mine)))
    assert result.stdout.strip() == "ok"
    found = rows(series(root, "steps"))
    assert [r["samples"] for r in found] == [4, 4, 4]  # from the forward's input, no loader
    assert all(math.isnan(r["data"]) for r in found)


def test_a_failing_user_sitecustomize_is_reported_as_python_would(tmp_path: Path) -> None:
    mine = tmp_path / "user-site"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text("raise RuntimeError('broken site')\n")
    root = tmp_path / "profiler"
    env = environment(root, settings(), PYTHONPATH=str(mine))
    result = run_script(tmp_path, "print('ran')\n", env)
    assert result.stdout.strip() == "ran"
    assert "Error in sitecustomize" in result.stderr and "broken site" in result.stderr


EXPLICIT = """
import time
from trainops.profiler import phase, step

for i in range(5):
    with step(samples=4):
        with phase("data"):
            time.sleep(0.003)
        with phase("forward"):
            time.sleep(0.001)
step.begin("eval")
with phase("forward"):
    time.sleep(0.001)
step.end(samples=2)
print("ok")
"""


def test_the_one_line_api_without_torch(tmp_path: Path) -> None:
    root = tmp_path / "profiler"
    result = run_script(tmp_path, EXPLICIT, environment(root, settings()))
    assert result.stdout.strip() == "ok"
    train_rows, eval_rows = _split(rows(series(root, "steps")))
    assert [r["step"] for r in train_rows] == [0, 1, 2, 3, 4]
    for row in train_rows:
        assert row["samples"] == 4 and row["data"] >= 0.003 and row["forward"] >= 0.001
        assert row["data"] + row["forward"] <= row["duration"] + 1e-9
        assert math.isnan(row["backward"]) and math.isnan(row["optimizer"])
    assert [(r["step"], r["samples"]) for r in eval_rows] == [(0, 2)]


EXPLICIT_TORCH = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from trainops.profiler import step

model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(30, 3)), batch_size=6)
for (batch,) in loader:
    with step():
        for half in batch.split(3):         # two forwards and two optimizer steps per step
            model(half).sum().backward()
            optimizer.step()
print("ok")
"""


def test_explicit_steps_set_the_boundaries_and_the_hooks_time_the_phases(tmp_path: Path) -> None:
    root = tmp_path / "profiler"
    run_script(tmp_path, EXPLICIT_TORCH, environment(root, settings()))
    found = rows(series(root, "steps"))
    assert [r["step"] for r in found] == [0, 1, 2, 3, 4]
    for row in found:
        assert row["mode"] == MODE_TRAIN and row["samples"] == 6  # the batch fetched before
        assert all(row[p] >= 0 for p in PHASES), row
        assert sum(row[p] for p in PHASES) <= row["duration"] + 1e-9


def test_a_bad_settings_file_is_one_line_and_the_script_runs(tmp_path: Path) -> None:
    root = tmp_path / "profiler"
    bad = tmp_path / "profilerconfig.json"
    bad.write_text("[1, 2")
    code = (
        "import torch\nm = torch.nn.Linear(2, 2); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "m(torch.ones(1, 2)).sum().backward(); o.step(); print('ran')\n"
    )
    result = run_script(tmp_path, code, environment(root, bad, SM_CURRENT_HOST="algo-1"))
    assert result.stdout.strip() == "ran"
    lines = [line for line in result.stderr.splitlines() if "trainops" in line]
    assert len(lines) == 1 and str(bad) in lines[0], result.stderr
    assert len(series(root, "steps")) == 1


def test_a_broken_trainops_turns_step_timing_off_in_one_line(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "trainops"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no trainops here')\n")
    env = environment(tmp_path / "profiler", settings())
    env["PYTHONPATH"] = f"{BOOTSTRAP_DIR}:{shadow.parent}"
    code = "import torch\nprint(torch.ones(2).sum().item())\n"
    result = run_script(tmp_path, code, env)
    assert result.stdout.strip() == "2.0"
    assert result.stderr.strip() == (
        "trainops.profiler: step timing is off in this process (ImportError: no trainops here)"
    )


def test_the_step_columns_are_readable_by_the_reader(tmp_path: Path) -> None:
    from trainops._settings import Settings
    from trainops.profiler import ProfilerReader
    from trainops.storage import store_for

    root, _ = train(tmp_path, {"items": 16, "batch": 8})
    reader = ProfilerReader(store_for(root.as_uri(), Settings(home=tmp_path)), root.as_uri())
    assert reader.refresh()
    (key,) = reader.of_kind("steps")
    assert (key.host, key.rank) == ("algo-1", 0)
    assert json.dumps(reader.errors) == "[]"
    assert sys.executable


NEW_MODELS = """
import torch
from torch.utils.data import DataLoader, TensorDataset

def net():
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))

loader = DataLoader(TensorDataset(torch.randn(60, 3)), batch_size=4)   # 15 batches
first, second, judge = net(), net(), net().eval()
for model, steps in ((first, 15), (second, 5)):   # the hooks narrow after 10 steps of `first`
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _, (x,) in zip(range(steps), loader):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
with torch.no_grad():
    for _, (x,) in zip(range(4), loader):
        judge(x)
print("ok")
"""


def test_a_model_first_seen_after_the_hooks_narrowed_is_still_timed(tmp_path: Path) -> None:
    root = tmp_path / "profiler"
    run_script(tmp_path, NEW_MODELS, environment(root, settings()))
    train_rows, eval_rows = _split(rows(series(root, "steps")))
    assert [r["step"] for r in train_rows] == list(range(20))
    untimed = [r["step"] for r in train_rows if math.isnan(r["forward"])]
    assert untimed == [15]  # the step that showed `second`: the hooks spread again after it
    assert [(r["step"], r["samples"]) for r in eval_rows] == [(s, 4.0) for s in range(4)]
    assert all(r["forward"] > 0 for r in eval_rows)


def test_an_eval_model_first_seen_while_narrowed_widens_the_hooks(tmp_path: Path) -> None:
    code = NEW_MODELS.replace("((first, 15), (second, 5))", "((first, 15),)")
    root = tmp_path / "profiler"
    run_script(tmp_path, code, environment(root, settings()))
    train_rows, eval_rows = _split(rows(series(root, "steps")))
    assert len(train_rows) == 15 and all(r["forward"] > 0 for r in train_rows)
    # The first eval step holds two batches (the second showed the unseen module), then one each.
    assert [(r["step"], r["samples"]) for r in eval_rows] == [(0, 8.0), (1, 4.0), (2, 4.0)]


def test_a_sigterm_still_writes_the_rows_held_in_memory(tmp_path: Path) -> None:
    code = (
        "import os, signal, torch\n"
        "m = torch.nn.Linear(2, 2); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(6):\n    m(torch.ones(3, 2)).sum().backward(); o.step()\n"
        "m(torch.ones(3, 2))\n"  # the sixth step's row is written at this event
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "print('not reached')\n"
    )
    root = tmp_path / "profiler"
    script = tmp_path / "term.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)],
        env=environment(root, settings()),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGTERM and "not reached" not in done.stdout
    assert [r["step"] for r in rows(series(root, "steps"))] == [0, 1, 2, 3, 4, 5]


def test_a_profiler_directory_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    code = (
        "import torch\nfrom trainops.profiler import step\n"
        "m = torch.nn.Linear(2, 2); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(3):\n    m(torch.ones(3, 2)).sum().backward(); o.step()\n"
        "with step():\n    pass\n"
        "print('finished')\n"
    )
    result = run_script(tmp_path, code, environment(blocked, settings()))
    assert result.stdout.strip() == "finished"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "trainops.profiler: cannot write the last step rows"
    )


COMPILED = """
import torch
import torch._dynamo.utils as dynamo
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
compiled = torch.compile(model, backend="aot_eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(14):
    optimizer.zero_grad()
    compiled(torch.randn(5, 4)).sum().backward()
    optimizer.step()
print(sum(dynamo.counters["graph_break"].values()))
"""


def test_a_compiled_model_is_timed_without_graph_breaks_or_warnings(tmp_path: Path) -> None:
    root = tmp_path / "profiler"
    result = run_script(tmp_path, COMPILED, environment(root, settings()))
    assert result.stdout.strip() == "0" and result.stderr == ""
    found = rows(series(root, "steps"))
    assert [r["step"] for r in found] == list(range(14))
    assert all(r["forward"] > 0 and r["samples"] == 5 for r in found)


# Whether the bootstrap's pause at exit came, and after the script's own exit handlers: the
# script replaces time.sleep (looked up when the handler runs) with a line on stdout.
AT_EXIT = """
import atexit, sys, time, types
if sys.argv[1] == "torch":
    sys.modules.setdefault("torch", types.ModuleType("torch"))
atexit.register(print, "the script's own handler", flush=True)
time.sleep = lambda seconds: print(f"paused {seconds}", flush=True)
"""


@pytest.mark.parametrize(
    ("flag", "torch", "said"),
    [
        ("1", "torch", ["the script's own handler", "paused 0.01"]),
        ("1", "none", ["the script's own handler"]),  # never imported torch: nothing to wait for
        ("", "torch", ["the script's own handler"]),  # a job of one process
    ],
)
def test_a_process_of_several_pauses_last_at_exit_once_torch_is_in(
    tmp_path: Path, flag: str, torch: str, said: list[str]
) -> None:
    env = environment(None, TRAINOPS_YIELD_AT_EXIT=flag)
    result = run_script(tmp_path, AT_EXIT, env, torch)
    assert result.stdout.splitlines() == said


def test_a_process_only_paused_at_exit_sees_nothing_else_of_trainops(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "print(any('_compat' in p for p in sys.path),"
        " any(type(f).__name__ == '_TrainopsFinder' for f in sys.meta_path))\n"
    )
    paused = run_script(tmp_path, code, environment(None, TRAINOPS_YIELD_AT_EXIT="1"))
    assert paused.stdout.split() == ["False", "False"]  # no smdebug offered, no trainops finder
    observed = run_script(tmp_path, code, environment(tmp_path / "profiler"))
    assert observed.stdout.split() == ["True", "True"]
