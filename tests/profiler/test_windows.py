"""Framework profiling windows on a real PyTorch loop: detailed traces, the dataloader series,
Python stats; by step range and by time range."""

from __future__ import annotations

import ast
import gzip
import json
import math
import pstats
import time
from pathlib import Path
from typing import Any

from tests._support.system import require_extra
from tests.profiler._support import (
    TRAIN,
    environment,
    rows,
    run_script,
    series,
    settings,
    train,
    window,
)
from trainops.profiler import DATALOADER_COLUMNS
from trainops.profiler._settings import WINDOW_KINDS
from trainops.profiler._windows import WINDOWS


def _trace(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return document


def _files(root: Path, kind: str) -> list[str]:
    base = root / "framework" / kind / "algo-1" / "rank-0"
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())


def test_windows_by_step_range(tmp_path: Path) -> None:
    framework = {
        "detailed_profiling_config": window(2, 2),
        "dataloader_profiling_config": window(1, 3),
        "python_profiling_config": window(
            3, 2, python_profiler="cprofile", cprofile_timer="total_time"
        ),
    }
    root, _ = train(tmp_path, {"items": 64, "batch": 8, "workers": 2}, settings(framework))
    assert _files(root, "detailed") == ["1-step2-3.pt.trace.json.gz"]
    trace = _trace(root / "framework/detailed/algo-1/rank-0/1-step2-3.pt.trace.json.gz")
    assert trace["distributedInfo"]["rank"] == 0 and trace["traceEvents"]
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"ProfilerStep#2", "ProfilerStep#3"} <= names and "ProfilerStep#4" not in names
    assert any(str(name).startswith("aten::conv2d") for name in names)

    loader = series(root, "dataloader")
    assert loader.columns == list(DATALOADER_COLUMNS)
    fetched = [r for r in rows(loader) if not math.isnan(r["batch"])]
    started = [r for r in rows(loader) if math.isnan(r["batch"])]
    # Each iterator start is a row (batch NaN) in or out of the window: the Dataloader rule's
    # worker count; batches are rows only inside it.
    assert any(r["workers"] == 2.0 for r in started) and all(r["fetch"] >= 0 for r in started)
    assert [(r["step"], r["batch"], r["workers"]) for r in fetched] == [
        (1.0, 1.0, 2.0),
        (2.0, 2.0, 2.0),
        (3.0, 3.0, 2.0),
    ]
    assert all(r["fetch"] >= 0 for r in fetched)

    assert _files(root, "python") == [
        "1-step3-4/python_stats.html",
        "1-step3-4/python_stats.json",
        "1-step3-4/python_stats.prof",
    ]
    base = root / "framework/python/algo-1/rank-0/1-step3-4"
    stats = json.loads((base / "python_stats.json").read_text())
    assert (stats["first_step"], stats["last_step"], stats["timer"]) == (3, 4, "total_time")
    functions = {f["function"] for f in stats["functions"]}
    assert "backward" in functions and "step" in functions
    top = stats["functions"][0]
    assert top["cumulative_time"] >= top["total_time"] >= 0 and top["calls"] >= 1
    loaded = pstats.Stats(str(base / "python_stats.prof"))
    assert loaded.total_calls > 0  # type: ignore[attr-defined]
    page = (base / "python_stats.html").read_text()
    assert "<table>" in page and "http" not in page
    assert not list(root.rglob(".*"))  # no temporary left behind


def test_windows_by_time_range(tmp_path: Path) -> None:
    now = time.time()
    framework = {
        "detailed_profiling_config": window(start_unix_time=now - 5, duration=3600),
        "python_profiling_config": window(duration=3600, cprofile_timer="cpu_time"),
        "dataloader_profiling_config": window(start_unix_time=now + 3600, duration=1),
    }
    document = settings(framework, job_start=now)
    root, _ = train(tmp_path, {"items": 32, "batch": 8}, document)
    # Open from the first step to the end of the script (closed at exit); 4 train steps.
    assert _files(root, "detailed") == ["1-step0-3.pt.trace.json.gz"]
    trace = _trace(root / "framework/detailed/algo-1/rank-0/1-step0-3.pt.trace.json.gz")
    assert trace["traceEvents"]
    stats = json.loads(
        (root / "framework/python/algo-1/rank-0/1-step0-3/python_stats.json").read_text()
    )
    assert stats["timer"] == "cpu_time" and stats["functions"]
    # Its window is an hour away: only the iterator's start is recorded, no batch.
    loader = rows(series(root, "dataloader"))
    assert loader and all(math.isnan(r["batch"]) for r in loader)


PYINSTRUMENT_WINDOW = window(1, 1, python_profiler="pyinstrument", cprofile_timer="total_time")


def test_pyinstrument_when_asked(tmp_path: Path) -> None:
    require_extra("pyinstrument")  # make test installs it: in CI, its absence fails
    root, result = train(
        tmp_path,
        {"items": 24, "batch": 8, "sleep": 0.02},
        settings({"python_profiling_config": PYINSTRUMENT_WINDOW}),
    )
    assert "pyinstrument" not in result.stderr  # no fallback note
    assert _files(root, "python") == ["1-step1-1/python_stats.html", "1-step1-1/python_stats.json"]
    base = root / "framework/python/algo-1/rank-0/1-step1-1"
    stats = json.loads((base / "python_stats.json").read_text())
    assert (stats["profiler"], stats["timer"]) == ("pyinstrument", "wall")
    assert (stats["first_step"], stats["last_step"]) == (1, 1)
    # pyinstrument sampled the window's step: the loop and the step's 20 ms sleep are in it (a
    # 1 ms sampler may miss a sub-millisecond backward on a loaded machine; the sleep it cannot)
    functions = {f["function"] for f in stats["functions"]}
    assert {"main", "sleep"} <= functions, sorted(functions)
    assert all(not f["function"].startswith("[") for f in stats["functions"])
    top = stats["functions"][0]
    assert top["cumulative_time"] >= top["total_time"] >= 0 and top["calls"] >= 1
    assert "pyinstrument" in (base / "python_stats.html").read_text()  # its own page


def test_without_pyinstrument_the_window_uses_cprofile_and_says_so(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden" / "pyinstrument"  # first on the path: as if not installed
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    root = tmp_path / "profiler"
    document = settings({"python_profiling_config": PYINSTRUMENT_WINDOW})
    env = environment(root, document, PYTHONPATH=str(hidden.parent))
    result = run_script(tmp_path, TRAIN, env, json.dumps({"items": 24, "batch": 8}))
    base = root / "framework/python/algo-1/rank-0/1-step1-1"
    stats = json.loads((base / "python_stats.json").read_text())
    assert (stats["profiler"], stats["timer"]) == ("cprofile", "total_time") and stats["functions"]
    notes = [line for line in result.stderr.splitlines() if "pyinstrument" in line]
    assert notes == [
        "trainops.profiler: pyinstrument is not installed (pip install "
        "'trainops[pyinstrument]'); the Python window uses cProfile"
    ]


AFTER = """
import sys, torch
m = torch.nn.Linear(2, 2); o = torch.optim.SGD(m.parameters(), lr=0.1)
seen = []
for step in range(6):
    m(torch.ones(3, 2)).sum().backward(); o.step()
    seen.append((torch.autograd.profiler._is_profiler_enabled, sys.getprofile() is not None))
print(seen)
"""


def test_the_profilers_are_off_once_their_windows_close(tmp_path: Path) -> None:
    framework = {
        "detailed_profiling_config": window(1, 2),
        "python_profiling_config": window(
            1, 2, python_profiler="cprofile", cprofile_timer="default"
        ),
    }
    root = tmp_path / "profiler"
    result = run_script(tmp_path, AFTER, environment(root, settings(framework)))
    # Seen right after each optimizer step: the windows open at step 1's first event and close
    # once step 2 has ended (at step 3's first event, where its row is written).
    seen = [tuple(item) for item in ast.literal_eval(result.stdout.strip())]
    assert seen == [
        (False, False),
        (True, True),
        (True, True),
        (False, False),
        (False, False),
        (False, False),
    ]
    assert _files(root, "detailed") == ["1-step1-2.pt.trace.json.gz"]


def test_every_window_kind_the_settings_know_has_a_runner() -> None:
    assert WINDOWS.names() == WINDOW_KINDS
