"""The recorder's settings: the two variables, the tolerant reading of the settings file."""

from __future__ import annotations

import json
from pathlib import Path

from tests.profiler._support import settings, window
from trainops.profiler import Window, read_settings
from trainops.spec import FrameworkProfile, JobSpec, ProfilerConfig


def _env(tmp_path: Path, document: object | None = None, text: str | None = None) -> dict[str, str]:
    env = {"TRAINOPS_PROFILER_DIR": str(tmp_path / "profiler"), "SM_CURRENT_HOST": "algo-9"}
    if document is not None or text is not None:
        path = tmp_path / "profilerconfig.json"
        path.write_text(text if text is not None else json.dumps(document))
        env["TRAINOPS_PROFILER_CONFIG"] = str(path)
    return env


def test_without_the_directory_nothing_is_recorded(tmp_path: Path) -> None:
    found = read_settings({"TRAINOPS_PROFILER_CONFIG": str(tmp_path / "x.json")})
    assert found.directory is None


def test_a_missing_file_means_step_timing_only(tmp_path: Path) -> None:
    env = _env(tmp_path)
    env["TRAINOPS_PROFILER_CONFIG"] = str(tmp_path / "absent.json")
    found = read_settings(env)
    assert found.directory == tmp_path / "profiler"
    assert (found.host, found.attempt, found.windows, found.problems) == ("algo-9", 1, (), ())


def test_the_spec_dump_gives_the_sdk_default_windows(tmp_path: Path) -> None:
    config = ProfilerConfig(framework_profile_params=FrameworkProfile())
    job = JobSpec(entry_point="t.py", profiler_config=config).view()
    assert job.profiling is not None
    document = {"host": "algo-2", "attempt": 3, "job_start": 12.5}
    document["profiler_config"] = job.profiling.to_json()
    found = read_settings(_env(tmp_path, document))
    assert (found.host, found.attempt, found.job_start) == ("algo-2", 3, 12.5)
    steps = {w.kind: (w.start_step, w.num_steps, w.by_time) for w in found.windows}
    assert steps == {
        "detailed": (5, 1, False),
        "dataloader": (7, 1, False),
        "python": (9, 3, False),
    }
    python = found.windows[2]
    assert (python.python_profiler, python.cprofile_timer) == ("cprofile", "total_time")


def test_empty_windows_take_the_sdk_defaults_and_null_ones_are_off(tmp_path: Path) -> None:
    framework: dict[str, object] = {"detailed_profiling_config": {}}
    framework["python_profiling_config"] = None
    found = read_settings(_env(tmp_path, settings(framework)))
    assert found.windows == (Window("detailed", 5, 1),)


def test_a_time_window_and_python_options(tmp_path: Path) -> None:
    python = window(start_unix_time=100, duration=5, python_profiler="PyInstrument")
    python["cprofile_timer"] = "off_cpu_time"
    found = read_settings(_env(tmp_path, settings({"python_profiling_config": python})))
    (only,) = found.windows
    assert (only.by_time, only.start_unix_time, only.duration) == (True, 100.0, 5.0)
    assert (only.python_profiler, only.cprofile_timer) == ("pyinstrument", "off_cpu_time")


def test_a_file_that_is_not_json_is_one_problem_naming_it(tmp_path: Path) -> None:
    found = read_settings(_env(tmp_path, text="{not json"))
    assert found.directory is not None and found.windows == ()
    (problem,) = found.problems
    assert str(tmp_path / "profilerconfig.json") in problem
    assert "cannot read the profiler settings" in problem


def test_ill_typed_keys_are_named_and_take_their_defaults(tmp_path: Path) -> None:
    loader = window()
    loader["start_step"] = "seven"
    document = settings({"dataloader_profiling_config": loader})
    document["attempt"] = "two"
    found = read_settings(_env(tmp_path, document))
    assert found.attempt == 1
    assert found.problems == ("profiler settings: 'attempt' is not a int; ignored",)
    assert found.windows == (Window("dataloader", 7, 1),)


def test_disable_profiler_turns_recording_off(tmp_path: Path) -> None:
    document = settings()
    document["profiler_config"]["disable_profiler"] = True
    assert read_settings(_env(tmp_path, document)).directory is None


def test_windows_cover_steps_and_times() -> None:
    by_step = Window("detailed", start_step=5, num_steps=2)
    assert [s for s in range(10) if by_step.covers(s, 0.0, 0.0)] == [5, 6]
    assert not by_step.ended(6, 0.0, 0.0) and by_step.ended(7, 0.0, 0.0)
    from_start = Window("python", duration=10.0)
    assert from_start.covers(0, 105.0, 100.0) and not from_start.covers(0, 111.0, 100.0)
    assert from_start.ended(3, 110.0, 100.0) and not from_start.ended(3, 109.0, 100.0)
    fixed = Window("dataloader", start_unix_time=50.0, duration=1.0)
    assert fixed.covers(0, 50.5, 0.0) and not fixed.covers(0, 49.0, 0.0)


def test_the_profiler_keys_may_sit_at_the_top_of_the_document(tmp_path: Path) -> None:
    nested = settings({"python_profiling_config": window(2, 4)})
    flat = {k: v for k, v in nested.items() if k != "profiler_config"}
    flat.update(nested["profiler_config"], version=1, local_path="/x", prefix="file:///p")
    found = read_settings(_env(tmp_path, flat))
    assert found.windows == (Window("python", 2, 4),) and found.problems == ()
