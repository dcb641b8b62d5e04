"""Right-sizing advice on constructed measurements: each case gets its advice, with numbers that
follow the stated model and the catalog's prices, and a healthy job gets none."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tests.report._synthetic import (
    Synthetic,
    dataloader_dir,
    make_job,
    step_rows,
    steps_dir,
    system_dir,
    system_rows,
    write_meta,
    write_series,
)
from trainops.catalog import get_instance_type
from trainops.report import report_data


def _advice(syn: Synthetic) -> dict[str, Any]:
    job = syn.store.get_job(syn.job.name)
    assert job is not None
    data = report_data(job, [], syn.reader(), [])
    advice: dict[str, Any] = data["advice"]
    return advice


def _kinds(advice: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["kind"]: item for item in advice["items"]}


def _job(tmp: Path, instance_type: str, cpu: float, *, gpu: float | None = None, memory: float = 30.0,
         cores: int = 2, steps: int = 1000, **kwargs: Any) -> Synthetic:  # fmt: skip
    syn = make_job(tmp, instance_type=instance_type, **kwargs)
    gpus = 0 if gpu is None else 1
    write_meta(syn, cores=cores, gpus=[{"index": 0}] * gpus, gpu_status="nvml" if gpus else "none")
    columns, rows = system_rows(
        2000, cores, lambda i, c: cpu, gpus=gpus, gpu=lambda i, g: gpu or 0.0,
        gpu_memory=lambda i, g: 20.0, memory=memory,
    )  # fmt: skip
    write_series(syn, system_dir("algo-1"), columns, rows)
    write_series(syn, steps_dir("algo-1", 0), *step_rows(steps, duration=lambda i: 0.2))
    return syn


def test_a_gpu_at_37_percent_gets_a_larger_batch_and_learning_rate(tmp_path: Path) -> None:
    syn = _job(tmp_path, "ml.g4dn.xlarge", 50.0, gpu=37.0,
               hyperparameters={"batch-size": 64, "lr": 0.1})  # fmt: skip
    advice = _advice(syn)
    item = _kinds(advice)["batch_size"]
    assert item["measured"]["utilization_p95"] == 37.0 and item["measured"]["factor"] == 2
    assert "batch-size=64 -> 128" in item["text"] and "lr=0.1 -> 0.2" in item["text"]
    assert "Goyal" in item["model"]
    now, proposed = item["current"], item["proposed"]
    u = 0.37
    assert math.isclose(
        proposed["seconds_per_unit"], now["seconds_per_unit"] * ((1 - u) / 2 + u), rel_tol=1e-3
    )
    price = get_instance_type("ml.g4dn.xlarge").on_demand_usd_per_hour
    assert math.isclose(
        proposed["usd_per_unit"], proposed["seconds_per_unit"] / 3600 * price, rel_tol=1e-3
    )
    assert advice["unit"] == "1,000 steps"  # no epoch in the data: the unit says so
    assert math.isclose(advice["seconds_per_unit"], 1000 * 0.201, rel_tol=1e-3)


def test_a_cpu_bound_job_gets_a_larger_cpu_type_and_a_gpu_type(tmp_path: Path) -> None:
    syn = _job(tmp_path, "ml.m5.large", 98.0, hyperparameters={"epochs": 4})
    advice = _advice(syn)
    kinds = _kinds(advice)
    larger = kinds["larger_instance"]
    assert larger["proposed"]["instance_type"] == "ml.m5.xlarge"  # 2 -> 4 vCPUs, same family
    u = 0.98
    expected = larger["current"]["seconds_per_unit"] * ((1 - u) + u / 2)
    assert math.isclose(larger["proposed"]["seconds_per_unit"], expected, rel_tol=1e-3)
    xlarge = get_instance_type("ml.m5.xlarge").on_demand_usd_per_hour
    assert math.isclose(larger["proposed"]["usd_per_unit"], expected / 3600 * xlarge, rel_tol=1e-3)
    assert "Amdahl" in larger["model"] and "98 %" in larger["text"]
    gpu = kinds["gpu_instance"]
    assert gpu["proposed"]["instance_type"] == "ml.g4dn.xlarge"  # the cheapest GPU type
    assert math.isclose(gpu["measured"]["break_even_speedup"], 0.736 / 0.115, rel_tol=1e-3)
    # the job completed 1,000 steps over 4 epochs: the unit is an epoch of 250 steps
    assert advice["unit"] == "epoch" and "4 epochs" in advice["unit_source"]
    assert math.isclose(advice["seconds_per_unit"], 250 * 0.201, rel_tol=1e-3)
    assert "batch_size" not in kinds and "smaller_instance" not in kinds


def test_more_dataloader_workers_than_cores_gets_fewer(tmp_path: Path) -> None:
    syn = _job(tmp_path, "ml.m5.large", 80.0)
    write_series(
        syn, dataloader_dir("algo-1", 0), ["time", "fetch", "workers", "batch", "step"],
        [[1_750_000_040.0 + i, 0.01, 8, i % 50, i] for i in range(120)],
    )  # fmt: skip
    advice = _advice(syn)
    item = _kinds(advice)["dataloader_workers"]
    assert item["measured"] == {"workers": 8, "cores": 2, "ranks": 1}
    assert item["proposed"]["num_workers"] == 1 and "num_workers=1" in item["text"]
    # the batch index restarts every 50 batches: that is the epoch
    assert advice["unit"] == "epoch" and advice["unit_source"].endswith("after 50 batches")


def test_workers_from_the_hyperparameters_when_no_dataloader_window_ran(tmp_path: Path) -> None:
    syn = _job(tmp_path, "ml.m5.large", 80.0, cores=4, hyperparameters={"workers": 8})
    item = _kinds(_advice(syn))["dataloader_workers"]
    assert item["proposed"]["num_workers"] == 3 and "hyperparameter workers" in item["text"]


def test_an_idle_job_gets_a_smaller_cheaper_type(tmp_path: Path) -> None:
    syn = _job(tmp_path, "ml.m5.4xlarge", 5.0, memory=3.0, cores=16)
    item = _kinds(_advice(syn))["smaller_instance"]
    smaller = get_instance_type(item["proposed"]["instance_type"])
    current = get_instance_type("ml.m5.4xlarge")
    assert smaller.on_demand_usd_per_hour < current.on_demand_usd_per_hour and smaller.gpus == 0
    # 16 vCPUs at 5 % need ceil(16 * 0.05 / 0.7) = 2 vCPUs
    assert smaller.vcpus >= 2
    assert item["proposed"]["seconds_per_unit"] == item["current"]["seconds_per_unit"]
    ratio = smaller.on_demand_usd_per_hour / current.on_demand_usd_per_hour
    assert math.isclose(
        item["proposed"]["usd_per_unit"], item["current"]["usd_per_unit"] * ratio, rel_tol=1e-2
    )


def test_a_healthy_job_gets_no_advice(tmp_path: Path) -> None:
    advice = _advice(_job(tmp_path, "ml.m5.large", 80.0, memory=60.0))
    assert advice["available"] is True and advice["items"] == []


def test_no_steps_no_advice_and_it_says_why(tmp_path: Path) -> None:
    syn = make_job(tmp_path)
    write_meta(syn)
    write_series(syn, system_dir("algo-1"), *system_rows(100, 2, lambda i, c: 99.0))
    advice = _advice(syn)
    assert advice["available"] is False and "step timings" in advice["reason"]
