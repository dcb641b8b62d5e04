"""Each rule's own semantics, on synthetic series: thresholds, modes, overrides, the numbers it reports."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.rules import _data
from trainops._settings import Settings
from trainops.profiler import MODE_EVAL, ProfilerReader, Series, SeriesWriter
from trainops.rules import (
    IN_PROGRESS,
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    ProfilerData,
    RuleResult,
    evaluate_rules,
    make_rule,
)
from trainops.storage import store_for


def test_batch_size_needs_cpu_and_gpu_and_memory_low() -> None:
    busy_cpu = _data.job(
        _data.with_columns(cpu=_data.noisy(80), gpu0=_data.noisy(30), gpu0_memory=_data.noisy(20))
    )
    assert make_rule("BatchSize").evaluate(busy_cpu).status == NO_ISSUES_FOUND
    full_memory = _data.job(
        _data.with_columns(cpu=_data.noisy(20), gpu0=_data.noisy(30), gpu0_memory=_data.noisy(90))
    )
    assert make_rule("BatchSize").evaluate(full_memory).status == NO_ISSUES_FOUND
    found = make_rule("BatchSize").evaluate(_data.trigger("BatchSize"))
    assert found.evidence["algo-1"]["cpu_p95"] == pytest.approx(21.6, abs=0.5)
    assert "increase the batch size" in found.recommendation


def test_batch_size_looks_at_the_last_window_only() -> None:
    n = _data.SNAPSHOTS

    # Busy until the last 500 snapshots, idle in them: the default window sees only the idle part.
    def gpu(i: int, rng: object) -> float:
        return 95.0 if i < n - 500 else 30.0

    late = _data.job(
        _data.with_columns(
            cpu=_data.noisy(20),
            gpu0=gpu,
            gpu1=gpu,
            gpu0_memory=_data.noisy(20),
            gpu1_memory=_data.noisy(20),
        )
    )
    assert make_rule("BatchSize", {"patience": 0}).evaluate(late).status == ISSUES_FOUND
    wide = make_rule("BatchSize", {"patience": 0, "window": n}).evaluate(late)
    assert wide.status == NO_ISSUES_FOUND


def test_cpu_bottleneck_counts_the_share_of_snapshots() -> None:
    n = _data.SNAPSHOTS

    # After patience (1000) 200 snapshots remain; 60 % of them are bottlenecked.
    def cpu(i: int, rng: object) -> float:
        return 97.0 if (i - 1000) % 10 < 6 else 40.0

    data = _data.job(_data.with_columns(cpu=cpu, gpu0=_data.noisy(4, 3)), n=n)
    result = make_rule("CPUBottleneck").evaluate(data)
    assert result.status == ISSUES_FOUND
    assert result.evidence["algo-1"]["percent"] == pytest.approx(60.0)
    assert make_rule("CPUBottleneck", {"threshold": 70}).evaluate(data).status == NO_ISSUES_FOUND
    assert (
        make_rule("CPUBottleneck", {"cpu_threshold": 98}).evaluate(data).status == NO_ISSUES_FOUND
    )


def test_io_bottleneck_needs_the_gpu_waiting_too() -> None:
    busy_gpu = _data.job(_data.with_columns(iowait=_data.noisy(70, 5)))
    assert make_rule("IOBottleneck").evaluate(busy_gpu).status == NO_ISSUES_FOUND
    result = make_rule("IOBottleneck").evaluate(_data.trigger("IOBottleneck"))
    assert result.status == ISSUES_FOUND and "I/O wait" in result.details
    # SageMaker's DG documents gpu_threshold 70: with it, a GPU at 60 % counts as waiting.
    half = _data.job(_data.with_columns(iowait=_data.noisy(70, 5), gpu0=_data.noisy(60, 3)))
    assert make_rule("IOBottleneck", {"gpu_threshold": 70}).evaluate(half).status == ISSUES_FOUND


def test_gpu_memory_increase_measures_the_moving_average_rise() -> None:
    result = make_rule("GPUMemoryIncrease", {"patience": 0}).evaluate(
        _data.trigger("GPUMemoryIncrease")
    )
    seen = result.evidence["algo-1"]["gpu0"]
    assert seen["rise"] == pytest.approx(40.0, abs=0.5)
    assert (
        make_rule("GPUMemoryIncrease", {"increase": 7})
        .evaluate(_data.trigger("GPUMemoryIncrease"))
        .status
        == NO_ISSUES_FOUND
    )
    # A peak that comes back down is still a rise; a fall is not.
    falling = _data.job(_data.with_columns(gpu0_memory=_data.rising(60, 20)))
    assert make_rule("GPUMemoryIncrease", {"patience": 0}).evaluate(falling).status == (
        NO_ISSUES_FOUND
    )


def test_load_balancing_compares_every_pair_and_needs_two_gpus() -> None:
    result = make_rule("LoadBalancing").evaluate(_data.trigger("LoadBalancing"))
    assert result.evidence["algo-1"]["pair"] == ["gpu0", "gpu1"]
    assert result.evidence["algo-1"]["distance"] == pytest.approx(1.0)
    one = _data.job(
        {k: v for k, v in _data.with_columns(gpu0=_data.noisy(20)).items() if "gpu1" not in k},
        gpus=1,
    )
    assert make_rule("LoadBalancing").evaluate(one).details == "one GPU: nothing to balance"


def test_low_gpu_utilization_underuse_and_fluctuation() -> None:
    under = make_rule("LowGPUUtilization").evaluate(_data.trigger("LowGPUUtilization"))
    assert under.status == ISSUES_FOUND
    assert under.recommendation.startswith("gpu0 p95 utilization 3")
    assert "< 70 %: increase the batch size" in under.recommendation
    swing = make_rule("LowGPUUtilization").evaluate(_data.fluctuating())
    assert swing.status == ISSUES_FOUND and "fluctuates" in swing.details
    assert (
        make_rule("LowGPUUtilization", {"threshold_p5": 1}).evaluate(_data.fluctuating()).status
        == NO_ISSUES_FOUND
    )


def test_max_initialization_time_while_running_and_without_steps() -> None:
    rule = make_rule("MaxInitializationTime", {"threshold": 1})
    waiting = ProfilerData(job_start=_data.T0, now=_data.T0 + 30)
    assert rule.evaluate(waiting).status == IN_PROGRESS
    late = ProfilerData(job_start=_data.T0, now=_data.T0 + 61)
    result = rule.evaluate(late)
    assert result.status == ISSUES_FOUND and "no step was recorded" in result.details
    quick = ProfilerData(job_start=_data.T0, job_end=_data.T0 + 20, now=_data.T0 + 20)
    assert rule.evaluate(quick).status == NO_ISSUES_FOUND
    # Without a start time the monitor's start (meta) stands in.
    found = make_rule("MaxInitializationTime").evaluate(
        replace(_data.trigger("MaxInitializationTime"), job_start=None)
    )
    assert found.evidence["initialization_seconds"] == pytest.approx(1500.0)


def test_step_outlier_modes() -> None:
    data = _data.eval_outliers()  # TRAIN steady on rank 0, EVAL with outliers on rank 1
    assert make_rule("StepOutlier").evaluate(data).status == ISSUES_FOUND
    assert make_rule("StepOutlier", {"mode": "TRAIN"}).evaluate(data).status == NO_ISSUES_FOUND
    evaluated = make_rule("StepOutlier", {"mode": "EVAL"}).evaluate(data)
    assert evaluated.status == ISSUES_FOUND
    assert set(evaluated.evidence) == {"algo-1/rank-1/EVAL"}
    assert evaluated.evidence["algo-1/rank-1/EVAL"]["outliers"] == 15
    assert make_rule("StepOutlier", {"n_outliers": 15}).evaluate(data).status == NO_ISSUES_FOUND
    assert make_rule("StepOutlier", {"stddev": 5}).evaluate(data).status == NO_ISSUES_FOUND
    glob = make_rule("StepOutlier", {"mode": "GLOBAL"}).evaluate(data)
    assert set(glob.evidence) == {"algo-1/rank-0/GLOBAL", "algo-1/rank-1/GLOBAL"}


def test_dataloader_too_few_too_many_and_unknown_cores() -> None:
    few = make_rule("Dataloader").evaluate(_data.job(loader=_data.dataloader_series(1), cores=16))
    assert few.status == ISSUES_FOUND and "< 70 %" in few.details
    assert "about 11 per rank" in few.recommendation
    many = make_rule("Dataloader").evaluate(_data.trigger("Dataloader"))
    assert "32 workers on 8 cores (400 % > 200 %)" in many.recommendation
    # Two ranks of 5 workers on 8 cores: 10 processes, 125 %.
    two = _data.job(loader=_data.dataloader_series(5))
    two = replace(two, dataloader={**two.dataloader, ("algo-1", 1): _data.dataloader_series(5)})
    result = make_rule("Dataloader").evaluate(two)
    assert result.evidence["algo-1"]["workers"] == 10 and result.status == NO_ISSUES_FOUND
    unknown = replace(_data.healthy(), meta={})
    assert make_rule("Dataloader").evaluate(unknown).details.endswith("(no meta/algo-1.json)")


def test_dataloader_counts_a_ranks_busiest_loader() -> None:
    # A training loader with 8 workers and an evaluation loader with none, on 8 cores: the
    # training loader's 8 processes run in parallel (100 %), not a median of 4 (50 % < 70 %).
    train, evaluation = _data.dataloader_series(8, n=20), _data.dataloader_series(0, n=20)
    both = Series(train.columns, sorted(train.rows + evaluation.rows), train.header)
    result = make_rule("Dataloader").evaluate(_data.job(loader=both, cores=8))
    assert result.status == NO_ISSUES_FOUND, result.details
    assert result.evidence["algo-1"]["workers"] == 8


def test_overall_system_usage_reports_quantiles_per_node() -> None:
    result = make_rule("OverallSystemUsage").evaluate(_data.healthy())
    cpu = result.evidence["algo-1"]["cpu"]
    assert set(cpu) == {"unit", "max", "p99", "p95", "p50", "min"}
    assert cpu["unit"] == "%" and 58 <= cpu["min"] <= cpu["p50"] <= cpu["max"] <= 62
    assert result.evidence["algo-1"]["gpu1_memory"]["unit"] == "%"
    assert result.evidence["algo-1"]["net_rx"]["unit"] == "B/s"


def test_overall_framework_metrics_splits_step_time() -> None:
    result = make_rule("OverallFrameworkMetrics").evaluate(_data.eval_outliers())
    modes = result.evidence["modes"]
    assert modes["TRAIN"]["steps"] == 400 and modes["EVAL"]["steps"] == 300
    shares = modes["TRAIN"]["phase_percent"]
    assert shares["backward"] == pytest.approx(40.0) and shares["other"] == pytest.approx(5.0)
    assert result.evidence["initialization_seconds"] == pytest.approx(5.0)


def test_profiler_report_runs_every_rule_with_overrides() -> None:
    data = _data.trigger("CPUBottleneck")
    report = make_rule("ProfilerReport").evaluate(data)
    assert report.status == ISSUES_FOUND and "CPUBottleneck" in report.details
    members = report.evidence["rules"]
    assert len(members) == 11 and members["CPUBottleneck"]["status"] == ISSUES_FOUND
    # gpu0 waits while gpu1 works: the imbalance and the idle GPU are found too.
    found = "CPUBottleneck, LoadBalancing, LowGPUUtilization"
    assert report.details == f"3 of 11 rules found issues: {found}"
    overrides = {
        "CPUBottleneck_threshold": 100,
        "LoadBalancing_threshold": 1,
        "LowGPUUtilization_threshold_p95": 5,
        "LowGPUUtilization_threshold_p5": 0,
    }
    quiet = make_rule("ProfilerReport", overrides).evaluate(data)
    assert quiet.status == NO_ISSUES_FOUND, quiet.details
    assert quiet.evidence["rules"]["CPUBottleneck"]["status"] == NO_ISSUES_FOUND
    with pytest.raises(ValueError, match="CPUBottleneck has no parameter 'treshold'"):
        make_rule("ProfilerReport", {"CPUBottleneck_treshold": 1})


def test_bad_parameters_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="StepOutlier has no parameter 'std'"):
        make_rule("StepOutlier", {"std": 2})
    with pytest.raises(KeyError, match="unknown profiler rule 'NoSuchRule'"):
        make_rule("NoSuchRule")


def test_result_json_is_strict() -> None:
    result = RuleResult(NO_ISSUES_FOUND, "x", "", {"nan": float("nan"), "pi": 3.14159265358979})
    assert json.dumps(result.to_json(), allow_nan=False) == (
        '{"status": "NoIssuesFound", "details": "x", "recommendation": "", '
        '"evidence": {"nan": null, "pi": 3.14159}}'
    )
    with pytest.raises(ValueError, match="not a rule status"):
        RuleResult("Maybe", "x")


def test_rules_read_what_recorders_write_through_the_reader(tmp_path: Path) -> None:
    """SeriesWriter chunks in a profiler prefix -> ProfilerReader -> ProfilerData -> rules."""
    prefix = tmp_path / "profiler-output"
    steps = SeriesWriter(
        prefix / "framework/steps/algo-1/rank-0",
        {"kind": "steps"},
        ["time", "step", "mode", "duration"],
        prefix="1-",
        rotate_rows=50,
    )
    for number, duration in enumerate(_data.outlier_steps()):
        steps.append([_data.T0 + number, number, MODE_EVAL, duration])
    steps.close()
    meta = {**_data.meta(), "cores": 4}
    (prefix / "meta").mkdir()
    (prefix / "meta/algo-1.json").write_text(json.dumps(meta))
    loader = SeriesWriter(
        prefix / "framework/dataloader/algo-1/rank-0",
        {"kind": "dataloader"},
        ["time", "fetch", "workers"],
        prefix="1-",
    )
    loader.append([_data.T0, 0.01, 16])
    loader.close()
    uri = prefix.as_uri()
    reader = ProfilerReader(store_for(uri, Settings.load()), uri)
    assert reader.refresh()
    data = ProfilerData.from_reader(reader, job_start=_data.T0, job_end=_data.T0 + 400)
    results = evaluate_rules(data)
    assert results["StepOutlier"].status == ISSUES_FOUND
    assert "rank-0/EVAL" in results["StepOutlier"].details
    assert results["Dataloader"].status == ISSUES_FOUND  # 16 workers on 4 cores
    assert results["LowGPUUtilization"].details == "no system metrics were recorded yet"
    assert {r.status for r in results.values()} <= {ISSUES_FOUND, NO_ISSUES_FOUND}


def test_overall_framework_metrics_names_only_the_phases_recorded() -> None:
    rows: list[tuple[float, ...]] = [(_data.T0 + i, float(i), 0.0, 0.2) for i in range(10)]
    steps = Series(["time", "step", "mode", "duration"], rows)
    result = make_rule("OverallFrameworkMetrics").evaluate(
        replace(_data.healthy(), steps={("algo-1", 0): steps})
    )
    assert result.evidence["modes"]["TRAIN"]["phase_percent"] == {"other": 100.0}
    assert result.details.startswith("10 TRAIN steps, mean 0.200 s (other 100 %)")


def test_a_finding_on_one_host_of_two_names_it() -> None:
    healthy, low = _data.healthy(), _data.trigger("LowGPUUtilization")
    both = replace(
        healthy,
        system={"algo-1": healthy.system["algo-1"], "algo-2": low.system["algo-1"]},
        meta={"algo-1": healthy.meta["algo-1"], "algo-2": healthy.meta["algo-1"]},
    )
    result = make_rule("LowGPUUtilization").evaluate(both)
    assert result.status == ISSUES_FOUND
    assert result.details.startswith("algo-2: gpu0 p95 utilization 3")
    assert set(result.evidence) == {"algo-1", "algo-2"}
    usage = make_rule("OverallSystemUsage").evaluate(both)
    assert usage.details.startswith("algo-1: cpu p95 ") and "; algo-2: cpu p95 " in usage.details
