"""bench/sagemaker_sdk_fit.py: the driver's wall-clock marks turned into phases, and the table.

The benchmark itself needs SeaweedFS and the SDK and takes minutes; its arithmetic is checked
here on marks as the driver writes them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.bench._load import load_bench


def _driver_result(created: float) -> dict[str, Any]:
    return {
        "status": "Completed",
        "marks": {
            "process_start": 100.0,
            "imported": 103.0,
            "estimator_ready": 104.0,
            "upload_start": 104.5,
            "upload_end": 104.75,
            "create_start": created - 0.25,
            "create_end": created,
            "first_log_line": created + 5.0,
            "fit_returned": created + 5.5,
        },
        "seen": {"InProgress": created + 0.125, "Completed": created + 0.5},
        "job": {"TrainingStartTime": 200.0, "TrainingEndTime": 200.375},
    }


def test_phases_are_measured_from_create_training_jobs_answer() -> None:
    bench = load_bench("sagemaker_sdk_fit")
    got = bench.phases(_driver_result(created=105.0))
    assert got["setup_s"] == 4.0 and got["import_s"] == 3.0
    assert (got["upload_s"], got["create_s"]) == (0.25, 0.25)
    assert (got["to_in_progress_s"], got["to_completed_s"]) == (0.125, 0.5)
    assert got["to_training_s"] is None  # the poller never read that secondary status
    assert (got["to_first_log_s"], got["to_fit_return_s"]) == (5.0, 5.5)
    assert got["total_s"] == 10.5 and got["job_run_s"] == 0.375


def test_the_table_shows_each_phase_and_the_floor() -> None:
    bench = load_bench("sagemaker_sdk_fit")
    samples = {
        "sdk": [bench.phases(_driver_result(105.0)), bench.phases(_driver_result(106.0))],
        "trainops_run_s": [0.5, 0.75],
    }
    result = {
        "summary": bench.summarise(samples),
        "samples": samples,
        "machine": {"cpu_model": "cpu", "usable_cores": 2},
        "versions": {"sagemaker": "2.257.7", "trainops": "0"},
        "date": "today",
        "load_average": [3.0, 0, 0],
        "load_average_end": [4.0, 0, 0],
        "rounds": 2,
    }
    table = bench.render_table(result)
    assert "| fit() end to end (child start → fit() returns) | 11.00 | 10.50-11.50 |" in table
    assert (
        "| floor: `trainops run hello.yaml` against the same server | 0.62 | 0.50-0.75 |" in table
    )
    assert "secondary status Training" not in table  # no sample: no row
    assert "load average 3.0 at the start and 4.0 at the end" in table


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--timeout", "-1"]])
def test_bad_options_are_refused(argv: list[str]) -> None:
    bench = load_bench("sagemaker_sdk_fit")
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
