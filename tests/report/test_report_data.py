"""The report's data: computed from profiler series written with SeriesWriter under a file://
prefix; figures checked against numpy and against what was written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.report._synthetic import (
    T0,
    make_job,
    standard_job,
    step_rows,
    steps_dir,
    system_dir,
    system_rows,
    write_meta,
    write_series,
)
from trainops.report import SECTIONS, report_data
from trainops.store import RuleEvaluation


def _data(syn, **kwargs):  # type: ignore[no-untyped-def]
    evaluations = syn.store.rule_evaluations(syn.job.name)
    job = syn.store.get_job(syn.job.name)
    return report_data(job, syn.store.transitions(job.name), syn.reader(), evaluations, **kwargs)


def _close(found: float, expected: float) -> bool:
    return math.isclose(found, expected, rel_tol=1e-3, abs_tol=1e-9)


def test_every_section_is_there_in_order_and_the_data_is_plain_json(tmp_path: Path) -> None:
    data = _data(standard_job(tmp_path))
    assert tuple(data["sections"]) == SECTIONS
    for name, section in data["sections"].items():
        assert isinstance(section["available"], bool), name
        if not section["available"]:
            assert section["reason"], name
    assert json.loads(json.dumps(data, allow_nan=False)) == data


def test_system_usage_statistics_are_numpy_percentiles(tmp_path: Path) -> None:
    syn = standard_job(tmp_path)
    data = _data(syn)
    rows = np.array(syn.written["system"])
    columns = ["time", "cpu", "cpu0", "cpu1", "iowait", "memory", "memory_bytes"]
    (node,) = data["sections"]["system_usage"]["nodes"]
    assert node["host"] == "algo-1" and node["samples"] == len(rows) and node["interval_ms"] == 100
    found = {m["metric"]: m for m in node["metrics"]}
    assert list(found) == columns[1:]
    for index, name in enumerate(columns[1:], start=1):
        for key, q in (("max", 100), ("p99", 99), ("p95", 95), ("p50", 50), ("min", 0)):
            assert _close(found[name][key], float(np.percentile(rows[:, index], q))), (name, key)
    assert found["cpu0"]["unit"] == "%" and found["memory_bytes"]["unit"] == "B"


def test_summary_split_comes_from_the_step_series(tmp_path: Path) -> None:
    syn = standard_job(tmp_path)
    summary = _data(syn)["sections"]["summary"]
    steps = np.array(syn.written["steps"])
    loop_start, loop_end = steps[:, 0].min(), (steps[:, 0] + steps[:, 3]).max()
    assert summary["start_time"] == T0 and summary["end_time"] == T0 + 600
    assert summary["job_duration_in_seconds"] == 600
    assert summary["training_loop_start"] == loop_start and summary["training_loop_end"] == loop_end
    assert _close(summary["initialization_in_seconds"], loop_start - T0)
    assert _close(summary["finalization_in_seconds"], T0 + 600 - loop_end)
    split = summary["split_percent"]
    assert _close(sum(split.values()), 100.0)
    assert _close(split["training_loop"], 100 * (loop_end - loop_start) / 600)


def test_step_durations_and_framework_split(tmp_path: Path) -> None:
    syn = standard_job(tmp_path)
    data = _data(syn)
    steps = np.array(syn.written["steps"])
    train = steps[steps[:, 2] == 0]
    (rank,) = data["sections"]["step_durations"]["ranks"]
    stats = rank["train"]["stats"]
    assert stats["count"] == len(train) == 2000 and rank["eval"]["stats"]["count"] == 20
    assert _close(stats["p95"], float(np.percentile(train[:, 3], 95)))
    assert _close(stats["mean"], float(train[:, 3].mean()))
    assert _close(stats["std"], float(train[:, 3].std()))
    assert sum(rank["train"]["histogram"]["counts"]) == 2000
    # every 100th step is 0.25 s against about 0.105: the 20 slow ones are outliers (3 std)
    assert rank["train"]["outliers"] == 20
    framework = data["sections"]["framework"]
    assert _close(framework["seconds"]["train"], float(train[:, 3].sum()))
    assert _close(framework["phase_percent_of_train"]["backward"], 40.0)
    assert framework["phases_seen"] == ["data", "forward", "backward", "optimizer"]


def test_timelines_are_bounded_and_keep_the_extremes(tmp_path: Path) -> None:
    syn = make_job(tmp_path)
    write_meta(syn)
    spike = 7777
    columns, rows = system_rows(20_000, 4, lambda i, c: 100.0 if i == spike and c == 2 else 40.0)
    write_series(syn, system_dir("algo-1"), columns, rows, rotate_rows=3000)
    data = _data(syn, max_points=400)
    lines = data["timelines"]["algo-1"]
    assert all(len(line) <= 400 for line in lines["host"].values())
    assert all(len(line) <= 100 for line in lines["cores"].values())  # a quarter per core
    peak = max(lines["cores"]["cpu2"], key=lambda p: p[1])
    assert peak == [round(rows[spike][0] - T0, 3), 100.0]
    heat = data["heatmaps"]["algo-1"]
    assert heat["cores"] == ["cpu0", "cpu1", "cpu2", "cpu3"] and len(heat["values"][0]) <= 240
    assert len(json.dumps(data)) < 200_000  # 20,000 samples x 8 columns stay small


def test_a_short_timeline_is_what_was_recorded(tmp_path: Path) -> None:
    syn = make_job(tmp_path)
    write_meta(syn)
    columns, rows = system_rows(50, 1, lambda i, c: float(i % 7))
    write_series(syn, system_dir("algo-1"), columns, rows, rotate_rows=7)
    line = _data(syn)["timelines"]["algo-1"]["host"]["cpu"]
    assert line == [[round(r[0] - T0, 3), r[1]] for r in rows]


def test_sections_without_data_say_why(tmp_path: Path) -> None:
    syn = make_job(tmp_path, rules=[])
    write_meta(syn)
    columns, rows = system_rows(100, 2, lambda i, c: 20.0)
    write_series(syn, system_dir("algo-1"), columns, rows)
    sections = _data(syn)["sections"]
    assert (
        "no GPU on algo-1 (no NVIDIA GPU (NVML not found))" in sections["gpu_utilization"]["reason"]
    )
    assert "no GPU on algo-1" in sections["gpu_memory"]["reason"]
    assert "nothing to balance" in sections["load_balancing"]["reason"]
    assert "no step timings" in sections["framework"]["reason"]
    assert "no step timings" in sections["summary"]["reason"]
    assert "configured no rules" in sections["rules"]["reason"]
    assert sections["batch_size"]["nodes"][0]["note"].startswith("no GPU on algo-1")
    assert sections["cpu_bottlenecks"]["dataloader"]["reason"].startswith("no dataloader")


def test_gpu_sections_follow_the_rules_parameters(tmp_path: Path) -> None:
    syn = make_job(
        tmp_path,
        rules=[{"rule": "ProfilerReport", "rule_parameters": {"LoadBalancing_threshold": 0.3}}],
    )
    write_meta(syn, gpus=[{"index": 0}, {"index": 1}], gpu_status="nvml")
    columns, rows = system_rows(
        1000, 2, lambda i, c: 30.0, gpus=2,
        gpu=lambda i, g: 37.0 if g == 0 else 95.0, gpu_memory=lambda i, g: 20.0 + i * 0.05,
    )  # fmt: skip
    write_series(syn, system_dir("algo-1"), columns, rows)
    columns, rows = step_rows(300)
    write_series(syn, steps_dir("algo-1", 0), columns, rows)
    write_series(syn, steps_dir("algo-1", 1), *step_rows(300, duration=lambda i: 0.2))
    sections = _data(syn)["sections"]
    gpus = {g["gpu"]: g for g in sections["gpu_utilization"]["gpus"]}
    assert gpus[0]["p95"] == 37.0 and gpus[0]["verdict"] == "underused"
    assert gpus[1]["verdict"] == "ok"
    balance = sections["load_balancing"]
    assert balance["threshold"] == 0.3 and balance["gpu_pairs"][0]["found"] is True
    assert _close(balance["gpu_pairs"][0]["distance"], 1.0)  # disjoint histograms
    assert _close(balance["slowest_over_fastest"], 0.2 / 0.1)
    memory = {g["gpu"]: g for g in sections["gpu_memory"]["gpus"]}
    assert memory[0]["found"] is True and _close(memory[0]["rise"], 999 * 0.05 - 9 * 0.05)
    batch = sections["batch_size"]["nodes"][0]["gpus"]
    assert [g["could_grow"] for g in batch] == [True, False]


def test_rules_come_from_the_store_and_configured_ones_are_listed(tmp_path: Path) -> None:
    syn = standard_job(tmp_path, rules=["ProfilerReport", {"rule": "StepOutlier", "name": "slow"},
                                        {"rule": "CPUBottleneck", "name": "cpu"}])  # fmt: skip
    # the shape trainops.rules records: the verdict under "result", members in its evidence
    members = {
        "StepOutlier": {"status": "IssuesFound", "details": "20 outliers",
                        "recommendation": "look at step 99", "evidence": {"outliers": 20}},
        "BatchSize": {"status": "NoIssuesFound", "details": "no GPU", "recommendation": "",
                      "evidence": {}},
    }  # fmt: skip
    verdict = {"status": "IssuesFound", "details": "1 of 2 rules found issues: StepOutlier",
               "recommendation": "StepOutlier: look at step 99", "evidence": {"rules": members}}  # fmt: skip
    for name, rule, status, body in (
        ("ProfilerReport", "ProfilerReport", "IssuesFound", {"result": verdict, "evaluations": 4}),
        ("slow", "StepOutlier", "InProgress", {"result": None, "evaluations": 0}),
    ):
        syn.store.set_rule_evaluation(
            RuleEvaluation(
                syn.job.name, name, rule, "profiler", status, f"{name} details", T0, body
            )
        )
    rules = _data(syn)["sections"]["rules"]
    rows = [(r["name"], r["status"], r.get("member_of")) for r in rules["rules"]]
    assert rows == [
        ("ProfilerReport", "IssuesFound", None),
        ("StepOutlier", "IssuesFound", "ProfilerReport"),
        ("BatchSize", "NoIssuesFound", "ProfilerReport"),
        ("slow", "InProgress", None),
        ("cpu", "NotEvaluated", None),
    ]
    report, outlier, batch, slow, _ = rules["rules"]
    assert report["evaluations"] == 4 and report["evidence"] == "" and report["triggered"] == 1
    assert outlier["recommendation"] == "look at step 99" and json.loads(outlier["evidence"]) == {
        "outliers": 20
    }
    assert batch["triggered"] == 0 and batch["evidence"] == ""
    assert slow["recommendation"] == "" and slow["description"] == "steps far slower than the mean"
    assert rules["final"] is False and rules["status_counts"]["IssuesFound"] == 2


def test_a_running_job_reports_up_to_now(tmp_path: Path) -> None:
    syn = standard_job(tmp_path, status="InProgress")
    data = _data(syn, now=T0 + 300)
    assert data["job"]["running"] is True
    summary = data["sections"]["summary"]
    assert summary["end_time"] == T0 + 300 and summary["ended"] is False


@pytest.mark.parametrize("broken", [b"not a chunk", b"TSC1" + b"\0" * 30])
def test_an_unreadable_chunk_is_named_and_the_rest_counts(tmp_path: Path, broken: bytes) -> None:
    syn = standard_job(tmp_path)
    (syn.root / "system" / "algo-1" / "1-999999.tsc").write_bytes(broken)
    data = _data(syn)
    assert data["sections"]["system_usage"]["nodes"][0]["samples"] == 6000
    assert any("1-999999.tsc" in e for e in data["read_errors"])
