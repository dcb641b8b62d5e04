"""``trainops study``: run one job spec over a list of resource configurations, one at a time,
and print how it scaled (samples/s, time to a target metric, scaling efficiency, cost), with a
PNG plot and a JSON file of the figures next to the study file. The study and its rows are also
recorded through the API as it runs (``POST /api/v1/studies``), so every client of the server
and its web UI's studies page see it; a failed recording is said once and the study goes on.

Ctrl-C stops the job that is running (with an embedded server) and ends the study.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from trainops._errors import SpecError, TrainopsError
from trainops._settings import Settings
from trainops.cli._run import INTERRUPTED
from trainops.client import Client, JobFollower, connect, submit_job
from trainops.cost import (
    DeadlineChoice,
    StudyRun,
    choose_for_deadline,
    plot_study,
    prices_of,
    render_deadline,
    render_study,
    scaling_rows,
    throughput_of,
)
from trainops.cost import time_to_target as first_time_at
from trainops.spec import (
    JobSpec,
    StudyConfiguration,
    StudySpec,
    check_channel_sources,
    load_spec,
    load_study,
)

__all__ = ["study"]


def study(args: argparse.Namespace) -> int:
    plan = load_study(args.spec)
    folder = Path(args.spec).resolve().parent
    job_path = folder / plan.job
    base = load_spec(job_path)
    check_channel_sources(base, str(job_path))  # every job would fail at its download
    settings = Settings.load()
    # Every configuration is checked before the first job runs: a bad one found after an hour
    # of jobs would throw their results away.
    variants = [_checked_variant(base, config, i) for i, config in enumerate(plan.configurations)]
    if plan.plot and importlib.util.find_spec("matplotlib") is None:
        raise TrainopsError("the study's plot needs matplotlib: pip install 'trainops[plot]'")
    runs: list[StudyRun] = []
    with connect(settings) as client:
        record = _Recorder(client, plan, variants, runs, f"{base.entry_point}: scaling study",
                           study_name(Path(args.spec).stem, time.time()))  # fmt: skip
        record()
        for config, spec in zip(plan.configurations, variants, strict=True):
            try:
                runs.append(_run(client, settings, spec, config, plan, job_path.parent, record))
            except KeyboardInterrupt:
                record(ended="Stopped")
                print("\nStudy interrupted.", flush=True)
                return INTERRUPTED
            record()
        record(ended="Completed" if _all_completed(runs) else "Failed")
    rows = scaling_rows(runs)
    target = plan.target.metric if plan.target else None
    print("\n" + render_study(rows, target), flush=True)
    choice = _deadline(runs, plan, settings)
    if choice is not None:
        print("\n" + render_deadline(choice, target), flush=True)
    if plan.plot:
        results = (folder / plan.plot).with_suffix(".json")  # the figures first: they are data
        results.parent.mkdir(parents=True, exist_ok=True)
        figures: Any = [_row_json(r) for r in rows]
        if choice is not None:
            figures = {"configurations": figures, "deadline": choice.to_json()}
        results.write_text(json.dumps(figures, indent=2) + "\n")
        png = plot_study(rows, folder / plan.plot, f"{base.entry_point}: scaling study")
        print(f"Plot: {png}\nFigures: {results}", flush=True)
    return 0 if _all_completed(runs) else 1


def _all_completed(runs: list[StudyRun]) -> bool:
    return all(r.status == "Completed" for r in runs)


def study_name(stem: str, now: float) -> str:
    """The name a study is recorded under: its file's stem (as a job name allows) and the time,
    ``<stem>-YYYYMMDD-HHMMSS-mmm``."""
    base = re.sub(r"-+", "-", re.sub(r"[^a-zA-Z0-9]+", "-", stem)).strip("-")[:38] or "study"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{base}-{stamp}-{int(now * 1000) % 1000:03d}"


class _Recorder:
    """Records the study as it stands through the API; after a failure it says so once and
    records nothing more (the study itself goes on)."""

    def __init__(
        self,
        client: Client,
        plan: StudySpec,
        variants: list[JobSpec],
        runs: list[StudyRun],
        title: str,
        name: str,
    ) -> None:
        self.client, self.plan, self.variants, self.runs = client, plan, variants, runs
        self.title, self.name = title, name
        self.broken = False

    def __call__(self, *, running: str | None = None, ended: str | None = None) -> None:
        if self.broken:
            return
        study = {"name": self.name, "title": self.title, "status": ended or "InProgress",
                 "target_metric": self.plan.target.metric if self.plan.target else None,
                 "rows": self._rows(running)}  # fmt: skip
        try:
            self.client.put_study(study)
        except TrainopsError as exc:
            self.broken = True
            print(f"warning: the study is not recorded on the server: {exc}", file=sys.stderr)

    def _rows(self, running: str | None) -> list[dict[str, Any]]:
        done = [_row_json(row) for row in scaling_rows(self.runs)]
        rows = [{k: row[k] for k in _ROW_KEYS} for row in done]
        pending = zip(self.plan.configurations, self.variants, strict=True)
        for i, (config, spec) in enumerate(pending):
            if i < len(rows):
                continue
            now = running if i == len(rows) else None
            rows.append({"label": config.label(spec.instance_type),
                         "instance_type": spec.instance_type,
                         "instance_count": config.instance_count,
                         "processes_per_host": config.processes_per_host, "job_name": now,
                         "status": "InProgress" if now else "Pending"})  # fmt: skip
        return rows


_ROW_KEYS = ("label", "instance_type", "instance_count", "processes_per_host", "job_name",
             "status", "throughput", "time_to_target_s", "billable_seconds", "cost_usd",
             "efficiency")  # fmt: skip


def _deadline(runs: list[StudyRun], plan: StudySpec, settings: Settings) -> DeadlineChoice | None:
    """The cheapest configuration in time, where the study file gives a deadline."""
    if plan.deadline_seconds is None:
        return None
    return choose_for_deadline(runs, plan.deadline_seconds,
                               lambda kind: prices_of(kind, settings.spot), plan.spot_overhead)  # fmt: skip


def _checked_variant(base: JobSpec, config: StudyConfiguration, index: int) -> JobSpec:
    try:
        return _variant(base, config)
    except SpecError as exc:
        problems = [(f"configurations.{index}.{path}", why) for path, why in exc.problems]
        raise SpecError(problems) from None


def _run(
    client: Client,
    settings: Settings,
    spec: JobSpec,
    config: StudyConfiguration,
    plan: StudySpec,
    job_dir: Path,
    record: _Recorder,
) -> StudyRun:
    label = config.label(spec.instance_type)
    name = submit_job(client, spec, settings, base_dir=job_dir, progress=False)
    print(f"{label}: {name} ...", flush=True)
    record(running=name)
    follower = JobFollower(client, name, lambda _line: None)
    try:
        description = follower.follow()
    except KeyboardInterrupt:
        if client.embedded:
            client.stop(name)
        raise
    print(f"{label}: {name} {description['TrainingJobStatus']}", flush=True)
    return _result(client, name, description, config, spec, label, plan)


def _variant(base: JobSpec, config: StudyConfiguration) -> JobSpec:
    data = base.model_dump(mode="json")
    distribution = dict(data["distribution"])
    distribution["processes_per_host"] = config.processes_per_host
    if distribution["mpi"]["enabled"]:
        distribution["mpi"] = {**distribution["mpi"], "processes_per_host": None}
    data.update(
        job_name=None,
        instance_type=config.instance_type or base.instance_type,
        instance_count=config.instance_count,
        distribution=distribution,
    )
    return JobSpec(**data)


def _result(
    client: Client,
    name: str,
    description: dict[str, Any],
    config: StudyConfiguration,
    spec: JobSpec,
    label: str,
    plan: StudySpec,
) -> StudyRun:
    rates = [float(p["Value"]) for p in client.metrics(name, plan.throughput_metric)]
    reached = None
    start = _seconds(description.get("TrainingStartTime"))
    if plan.target is not None and start is not None:
        points = [
            (t, float(p["Value"]))
            for p in client.metrics(name, plan.target.metric)
            if (t := _seconds(p.get("Timestamp"))) is not None
        ]
        maximize = plan.target.goal == "maximize"
        reached = first_time_at(points, start, plan.target.value, maximize=maximize)
    cost = description.get("Cost") or {}
    return StudyRun(
        label=label,
        instance_type=spec.instance_type,
        instance_count=config.instance_count,
        processes_per_host=config.processes_per_host,
        job_name=name,
        status=str(description["TrainingJobStatus"]),
        throughput=throughput_of(rates),
        time_to_target_s=reached,
        billable_seconds=description.get("BillableTimeInSeconds"),
        cost_usd=cost.get("EstimatedCostUsd"),
    )


def _seconds(stamp: Any) -> float | None:
    return None if not stamp else datetime.fromisoformat(str(stamp)).timestamp()


def _row_json(row: Any) -> dict[str, Any]:
    return {**asdict(row.run), "world": row.run.world, "efficiency": row.efficiency}
