"""The scaling study: its figures, its table and plot, its spec file, and `trainops study`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests._support.system import require_extra
from tests.e2e._harness import trainops, write_job
from trainops import SpecError
from trainops._settings import Settings
from trainops.cost import (
    StudyRun,
    plot_study,
    render_study,
    scaling_rows,
    throughput_of,
    time_to_target,
)
from trainops.spec import load_study
from trainops.store import MetadataStore


def _run(count: int, per_host: int, throughput: float | None) -> StudyRun:
    return StudyRun(
        label=f"{count}x{per_host}",
        instance_type="ml.m5.large",
        instance_count=count,
        processes_per_host=per_host,
        job_name=f"job-{count}-{per_host}",
        status="Completed",
        throughput=throughput,
        time_to_target_s=None,
        billable_seconds=10,
        cost_usd=0.0003,
    )


def test_efficiency_is_against_perfect_scaling_of_the_smallest_world() -> None:
    rows = scaling_rows([_run(1, 1, 100.0), _run(1, 2, 180.0), _run(2, 2, 300.0), _run(2, 1, None)])
    assert [r.efficiency for r in rows] == [1.0, 0.9, 0.75, None]


def test_throughput_leaves_the_warm_up_point_out() -> None:
    assert throughput_of([5.0, 100.0, 110.0, 90.0]) == 100.0
    assert throughput_of([7.0]) == 7.0
    assert throughput_of([]) is None


def test_time_to_target_is_the_first_point_at_or_past_it() -> None:
    points = [(105.0, 0.5), (110.0, 0.96), (120.0, 0.97)]
    assert time_to_target(points, 100.0, 0.95) == 10.0
    assert time_to_target(points, 100.0, 0.99) is None
    assert time_to_target([(103.0, 0.4), (101.0, 0.9)], 100.0, 0.5, maximize=False) == 3.0


def test_table_and_plot(tmp_path: Path) -> None:
    require_extra("dev", "matplotlib")
    rows = scaling_rows([_run(1, 1, 100.0), _run(1, 2, 180.0)])
    table = render_study(rows, "test_accuracy").splitlines()
    assert table[0].split()[:3] == ["configuration", "world", "samples/s"]
    assert "90%" in table[2] and "Completed" in table[2]
    png = plot_study(rows, tmp_path / "out" / "scaling.png", "t")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("job: job.yaml\nconfigurations: []\n", "configurations (line 2)"),
        (
            "job: job.yaml\nconfigurations:\n  - {instance_count: 0}\n",
            "configurations.0.instance_count (line 3)",
        ),
        ("job: job.yaml\nconfigurations: [{}]\nplot: out.svg\n", "plot (line 3): must name a .png"),
        ("job: job.yaml\nconfigurations: [{}]\nfoo: 1\n", "foo (line 3): unknown field"),
        ("- not a mapping\n", "the study must be a mapping"),
        ("job: job.yaml\nconfigurations: [{}]\ndeadline_seconds: 0\n", "deadline_seconds (line 3)"),
        ("job: job.yaml\nconfigurations: [{}]\nspot_overhead: -1\n", "spot_overhead (line 3)"),
        ("job: job.yaml\nconfigurations: [{}]\ndeadline_seconds: .nan\n", "deadline_seconds"),
    ],
)
def test_a_bad_study_file_names_the_field_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_study(path)


RATE_PRINTER = """
import os, time
world = int(os.environ["WORLD_SIZE"])
if os.environ["RANK"] == "0":
    for epoch, accuracy in ((1, 0.5), (2, 0.9), (3, 0.97)):
        time.sleep(0.2)
        print(f"samples_per_sec={100 * world} test_accuracy={accuracy}", flush=True)
"""


@pytest.mark.slow
def test_trainops_study_runs_every_configuration(tmp_path: Path) -> None:
    require_extra("dev", "matplotlib")
    write_job(
        tmp_path,
        RATE_PRINTER,
        metric_definitions=[
            {"name": "samples_per_sec", "regex": "samples_per_sec=([0-9.]+)"},
            {"name": "test_accuracy", "regex": "test_accuracy=([0-9.]+)"},
        ],
    )
    study = tmp_path / "study.yaml"
    study.write_text(
        "job: job.yaml\n"
        "configurations:\n"
        "  - {instance_count: 1, processes_per_host: 1}\n"
        "  - {instance_count: 2, processes_per_host: 1}\n"
        "target: {metric: test_accuracy, value: 0.95}\n"
        "plot: out/scaling.png\n"
        "deadline_seconds: 3600\n"
    )
    result = trainops("study", str(study), home=tmp_path / "home")
    assert result.returncode == 0, result.stdout + result.stderr
    written = json.loads((tmp_path / "out" / "scaling.json").read_text())
    figures = written["configurations"]
    deadline = written["deadline"]  # both reach the target well in time
    assert deadline["missed"] == [] and deadline["cheapest_spot"]["spot"] is True
    assert deadline["cheapest_spot"]["usd"] < deadline["cheapest_on_demand"]["usd"]
    assert "Deadline 3600 s (to test_accuracy;" in result.stdout
    assert [(f["world"], f["throughput"], f["efficiency"]) for f in figures] == [
        (1, 100.0, 1.0),
        (2, 200.0, 1.0),
    ]
    assert all(f["time_to_target_s"] is not None and f["status"] == "Completed" for f in figures)
    assert (tmp_path / "out" / "scaling.png").read_bytes()[:4] == b"\x89PNG"
    assert "samples/s" in result.stdout and "100%" in result.stdout
    _the_study_is_recorded(tmp_path / "home", figures)


def _the_study_is_recorded(home: Path, figures: list[dict[str, Any]]) -> None:
    """The embedded server recorded the study in the home's store, as every client sees it."""
    store = MetadataStore(Settings.load(env={"TRAINOPS_HOME": str(home)}).db_path)
    try:
        (study,) = store.list_studies()
    finally:
        store.close()
    assert study.name.startswith("study-") and study.status == "Completed"
    assert study.title == "train.py: scaling study" and study.target_metric == "test_accuracy"
    kept = ("job_name", "throughput", "efficiency", "cost_usd", "time_to_target_s")
    assert [{k: getattr(r, k) for k in kept} for r in study.rows] == [
        {k: f[k] for k in kept} for f in figures
    ]


def test_a_configuration_that_cannot_run_is_refused_before_any_job(tmp_path: Path) -> None:
    write_job(tmp_path, RATE_PRINTER)
    study = tmp_path / "study.yaml"
    study.write_text(
        "job: job.yaml\n"
        "configurations:\n"
        "  - {instance_count: 1}\n"
        "  - {instance_type: ml.nope.large, instance_count: 1}\n"
    )
    home = tmp_path / "home"
    result = trainops("study", str(study), home=home)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "configurations.1.instance_type" in result.stderr and "Traceback" not in result.stderr
    assert not (home / "trainops.db").exists()  # no job ran, none was even submitted


def test_a_study_is_named_from_its_files_stem_as_a_job_name_allows() -> None:
    from trainops.cli._study import study_name

    assert study_name("<b>x y/..", 0.5) == "b-x-y-19700101-000000-500"
    assert study_name("---", 0.0) == "study-19700101-000000-000"
    assert len(study_name("a" * 80, 1.0)) <= 63
