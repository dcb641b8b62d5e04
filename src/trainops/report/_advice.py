"""Right-sizing advice from the measurements, each with projected time and cost per unit of work.

The unit is an epoch where the data tells how many steps one has (the dataloader's batch index
restarting, or a completed job's ``epochs`` hyperparameter), else 1,000 training steps. Time per
step is measured: the slowest rank's training-loop time outside evaluation over its train steps.
Cost is time x the catalog's on-demand price per hour x instance count.

Four kinds of advice, each with its model stated in its ``model`` text:

- CPU-bound on a CPU type (CPU p95 at or above CPUBottleneck's ``cpu_threshold``, no GPU): the
  next larger type of the catalog, time projected by Amdahl's law with the measured mean CPU
  utilization as the parallel share; and the cheapest GPU type, with the speed-up it needs to pay;
- the accelerator underused (GPU p95 below LowGPUUtilization's ``threshold_p95``; CPU p95 below
  BatchSize's ``cpu_threshold_p95`` without GPUs): a batch k times larger with the learning rate
  scaled by k (the linear scaling rule of Goyal et al., 2017, "ImageNet in 1 hour"), time
  projected as fixed per-step overhead plus device work that grows with the batch;
- more dataloader workers than cores: fewer, with how many;
- everything low (CPU, GPU and memory): the cheapest smaller type that still holds the measured
  peak, time assumed unchanged, cost scaled by price.
"""

from __future__ import annotations

import math
from typing import Any

from trainops.catalog import Catalog, InstanceType
from trainops.report._stats import rounded

__all__ = ["advise"]

_BATCH_KEYS = (
    "batch-size",
    "batch_size",
    "train_batch_size",
    "per_device_train_batch_size",
    "batch",
)
_LR_KEYS = ("lr", "learning-rate", "learning_rate")
_WORKER_KEYS = ("workers", "num_workers", "num-workers", "dataloader_workers")
LOW_PERCENT = 30.0
TARGET_BUSY = 0.7  # a smaller type is sized so the measured p95 load fills it to 70 %


def advise(
    data: dict[str, Any], instance_type: str, count: int, catalog: Catalog
) -> dict[str, Any]:
    """The advice section of report ``data`` (whose other sections are computed)."""
    unit = data.get("throughput") or {}
    try:
        current = catalog.get(instance_type)
    except KeyError:
        return {"available": False, "reason": f"{instance_type} is not in the catalog", "items": []}
    seconds_per_step = unit.get("seconds_per_step")
    if not data["sections"]["system_usage"].get("available") or not seconds_per_step:
        return {"available": False, "items": [],
                "reason": "advice needs system metrics and step timings; one of them is missing"}  # fmt: skip
    per_unit = seconds_per_step * unit["steps_per_unit"]
    facts = _Facts(data, current, count, per_unit, unit["unit"])
    items = [
        *_cpu_bound(facts, catalog),
        *_batch_size(facts),
        *_workers(facts),
        *_smaller(facts, catalog),
    ]
    return {"available": True, "unit": unit["unit"], "unit_source": unit["source"],
            "seconds_per_unit": rounded(per_unit), "current": facts.figures(current, per_unit),
            "items": items,
            "prices": f"{catalog.currency} on-demand, {catalog.region}, as of {catalog.prices_as_of}"}  # fmt: skip


class _Facts:
    """The measurements the advice reads, for the busiest host."""

    def __init__(
        self, data: dict[str, Any], current: InstanceType, count: int, per_unit: float, unit: str
    ) -> None:
        self.data, self.current, self.count, self.per_unit = data, current, count, per_unit
        self.unit = unit
        nodes = data["sections"]["system_usage"]["nodes"]
        stats = [{m["metric"]: m for m in node["metrics"]} for node in nodes]
        self.host_stats = max(stats, key=lambda s: s.get("cpu", {}).get("p95", 0.0))
        self.host = nodes[stats.index(self.host_stats)]["host"]
        self.gpus = [
            m
            for name, m in self.host_stats.items()
            if name.startswith("gpu") and name[3:].isdigit()
        ]
        self.gpu_memory = [
            m
            for name, m in self.host_stats.items()
            if name.endswith("_memory") and name.startswith("gpu")
        ]
        self.hyper = data["job"]["hyperparameters"]

    def metric(self, name: str, stat: str) -> float | None:
        found = self.host_stats.get(name)
        return None if found is None else float(found[stat])

    def figures(self, kind: InstanceType, seconds: float) -> dict[str, Any]:
        return {
            "instance_type": kind.name,
            "instance_count": self.count,
            "usd_per_hour": rounded(kind.on_demand_usd_per_hour * self.count),
            "seconds_per_unit": rounded(seconds),
            "usd_per_unit": rounded(kind.cost_usd(seconds, self.count)),
        }

    def hyperparameter(self, keys: tuple[str, ...]) -> tuple[str, float] | None:
        for key in keys:
            try:
                return key, float(self.hyper[key])
            except (KeyError, ValueError):
                continue
        return None

    def cores(self) -> int:
        meta = self.data["hosts"].get(self.host, {})
        value = meta.get("cores")
        return int(value) if isinstance(value, int | float) and value > 0 else self.current.vcpus


def _item(
    kind: str,
    title: str,
    text: str,
    model: str,
    facts: _Facts,
    proposed: dict[str, Any] | None,
    **measured: Any,
) -> dict[str, Any]:
    return {"kind": kind, "title": title, "text": text, "model": model,
            "measured": {k: v for k, v in measured.items() if v is not None},
            "current": facts.figures(facts.current, facts.per_unit), "proposed": proposed}  # fmt: skip


def _cpu_bound(facts: _Facts, catalog: Catalog) -> list[dict[str, Any]]:
    p95, mean = facts.metric("cpu", "p95"), facts.metric("cpu", "mean")
    limit = _parameter(facts.data, "cpu_bottlenecks", "cpu_threshold", 90.0)
    if facts.gpus or p95 is None or mean is None or p95 < limit:
        return []
    found = []
    larger = _next_larger(facts.current, catalog)
    if larger is not None:
        share, ratio = min(1.0, mean / 100.0), larger.vcpus / facts.current.vcpus
        seconds = facts.per_unit * ((1 - share) + share / ratio)
        proposed = facts.figures(larger, seconds)
        found.append(_item(
            "larger_instance", f"CPU-bound: try {larger.name}",
            f"The CPU of {facts.host} was at {p95:.0f} % at p95 (mean {mean:.0f} %) on "
            f"{facts.current.vcpus} vCPUs with no GPU: the job waits for CPU. {larger.name} has "
            f"{larger.vcpus} vCPUs: {_per(proposed, facts.unit)} instead of {_per(facts.figures(facts.current, facts.per_unit), facts.unit)}.",
            f"Amdahl's law: the measured mean CPU utilization ({mean:.0f} %) is the share of time that "
            f"scales with vCPUs ({facts.current.vcpus} -> {larger.vcpus}); the rest stays. It assumes the "
            "work spreads over the added cores (enough DataLoader workers or intra-op threads); "
            "a single-threaded loop gains nothing. The utilization is the whole host's: on a machine "
            "shared with other work, theirs counts too.",
            facts, proposed, cpu_p95=p95, cpu_mean=mean, vcpus=facts.current.vcpus))  # fmt: skip
    gpu = _cheapest_gpu(catalog)
    if gpu is not None:
        need = gpu.on_demand_usd_per_hour / max(facts.current.on_demand_usd_per_hour, 1e-9)
        proposed = facts.figures(gpu, facts.per_unit / max(need, 1.0))
        found.append(_item(
            "gpu_instance", f"Or move the model to a GPU: {gpu.name}",
            f"{gpu.name} ({gpu.gpu_model}) costs {gpu.on_demand_usd_per_hour:.3f} USD/h against "
            f"{facts.current.on_demand_usd_per_hour:.3f}: it is cheaper per {facts.unit} "
            f"once a step runs more than {need:.1f}x faster there; the figures shown are that break-even.",
            "No GPU ran, so a GPU's speed-up cannot be measured here: run a short job on the GPU type "
            "(its report gives the real figure). Convolutional and transformer models commonly run "
            "10x or more faster on a GPU than on a few vCPUs.",
            facts, proposed, break_even_speedup=rounded(need)))  # fmt: skip
    return found


def _batch_size(facts: _Facts) -> list[dict[str, Any]]:
    if facts.gpus:
        p95 = max(g["p95"] for g in facts.gpus)
        mean = max(g["mean"] for g in facts.gpus)
        limit = _parameter(facts.data, "gpu_utilization", "threshold_p95", 70.0)
        device = "GPU"
    else:
        p95, mean = facts.metric("cpu", "p95"), facts.metric("cpu", "mean")
        limit = _parameter(facts.data, "batch_size", "cpu_threshold_p95", 70.0)
        device = "CPU"
    if p95 is None or mean is None or p95 >= limit:
        return []
    memory = max((g["p95"] for g in facts.gpu_memory), default=facts.metric("memory", "p95") or 0.0)
    factor = 1
    while factor < 8 and p95 * factor * 2 <= 90 and memory * factor * 2 <= 90:
        factor *= 2
    if factor == 1:
        return []
    share = min(1.0, mean / 100.0)
    seconds = facts.per_unit * ((1 - share) / factor + share)
    batch = facts.hyperparameter(_BATCH_KEYS)
    lr = facts.hyperparameter(_LR_KEYS)
    samples = _samples(facts.data)
    size = (
        f"{batch[0]}={batch[1]:g} -> {batch[1] * factor:g}"
        if batch
        else (
            f"the batch ({samples:g} samples per step) -> {samples * factor:g}"
            if samples
            else f"the batch x{factor}"
        )
    )
    rate = f"{lr[0]}={lr[1]:g} -> {lr[1] * factor:g}" if lr else f"the learning rate x{factor}"
    proposed = facts.figures(facts.current, seconds)
    text = (f"The {device} of {facts.host} was busy {p95:.0f} % at p95 (mean {mean:.0f} %), memory "
            f"{memory:.0f} % at p95: it waits between steps. Try {size} and {rate} (linear scaling), "
            f"with a gradual warm-up over the first epochs: {_per(proposed, facts.unit)} instead of "
            f"{_per(facts.figures(facts.current, facts.per_unit), facts.unit)}.")  # fmt: skip
    model = (f"Each step's {device} work ({mean:.0f} % of the time) grows with the batch while the rest "
             f"(data wait, Python, launches) stays per step, so an epoch takes (1 - u)/k + u of the "
             f"time with u = {share:.2f}, k = {factor}. The linear scaling rule (Goyal et al. 2017: "
             f"ImageNet in 1 hour, batch 256 -> 8192 with lr x32 and 5 warm-up epochs) kept accuracy "
             f"there; check yours. Memory grows with the batch ({memory:.0f} % now).")  # fmt: skip
    return [_item("batch_size", f"{device} underused: a {factor}x larger batch", text, model, facts,
                  proposed, utilization_p95=p95, utilization_mean=mean, memory_p95=memory, factor=factor)]  # fmt: skip


def _workers(facts: _Facts) -> list[dict[str, Any]]:
    loader = facts.data["sections"]["cpu_bottlenecks"].get("dataloader", {})
    ranks_here = max(
        1,
        sum(
            1
            for r in facts.data["sections"]["step_durations"].get("ranks", [])
            if r["host"] == facts.host
        ),
    )
    cores = facts.cores()
    workers = next((r["workers"] for r in loader.get("ranks", []) if r.get("workers")), None)
    source = "the dataloader profile"
    if workers is None and (given := facts.hyperparameter(_WORKER_KEYS)) is not None:
        workers, source = given[1], f"hyperparameter {given[0]}"
    if workers is None or workers * ranks_here <= cores:
        return []
    suggested = max(1, cores // ranks_here - 1)
    text = (
        f"{workers:g} DataLoader workers per rank x {ranks_here} rank(s) on {cores} cores of "
        f"{facts.host} ({source}): the workers and the training process compete for the cores. "
        f"Use num_workers={suggested} (cores per rank minus one for the training process)."
    )
    model = (
        "No speed-up is projected: the figures are the measured ones, an upper bound. Fewer "
        "processes use less memory and switch less; add workers back only while the data wait "
        "(the step's data phase) shrinks."
    )
    proposed = facts.figures(facts.current, facts.per_unit) | {"num_workers": suggested}
    return [_item("dataloader_workers", f"Fewer DataLoader workers: {suggested} instead of {workers:g}",
                  text, model, facts, proposed, workers=workers, cores=cores, ranks=ranks_here)]  # fmt: skip


def _smaller(facts: _Facts, catalog: Catalog) -> list[dict[str, Any]]:
    cpu, memory = facts.metric("cpu", "p95"), facts.metric("memory", "p95")
    gpu = max((g["p95"] for g in facts.gpus), default=0.0)
    if cpu is None or cpu >= LOW_PERCENT or gpu >= LOW_PERCENT or (memory or 0.0) >= 50.0:
        return []
    need_cpus = math.ceil(facts.current.vcpus * cpu / 100.0 / TARGET_BUSY)
    used = facts.metric("memory_bytes", "p95")
    need_gib = (
        used / 1024**3 if used else facts.current.memory_gib * (memory or 0.0) / 100.0
    ) * 1.3
    need_gpus = 1 if facts.gpus and gpu > 5.0 else 0
    fits = [
        t for t in catalog.instance_types.values()
        if t.vcpus >= need_cpus and t.memory_gib >= need_gib and t.gpus >= need_gpus
        and (need_gpus > 0 or t.gpus == 0)
        and t.on_demand_usd_per_hour < facts.current.on_demand_usd_per_hour
    ]  # fmt: skip
    if not fits:
        return []
    smaller = min(fits, key=lambda t: (t.on_demand_usd_per_hour, -t.vcpus))
    proposed = facts.figures(smaller, facts.per_unit)
    text = (f"{facts.host} was mostly idle: CPU {cpu:.0f} % at p95, memory {memory or 0:.0f} %"
            + (f", GPU {gpu:.0f} %" if facts.gpus else "") + f". {smaller.name} ({smaller.vcpus} vCPUs, "
            f"{smaller.memory_gib:g} GiB) holds the measured peak: {_per(proposed, facts.unit)} instead of "
            f"{_per(facts.figures(facts.current, facts.per_unit), facts.unit)}.")  # fmt: skip
    model = (f"Sized so the measured CPU p95 fills at most {TARGET_BUSY:.0%} of the new vCPUs "
             f"(needs {need_cpus}) and memory keeps 30 % headroom over its p95 ({need_gib:.1f} GiB); "
             "time per unit assumed unchanged, cost scaled by the price. A phase the samples missed "
             "(a short peak) could run slower.")  # fmt: skip
    return [
        _item(
            "smaller_instance",
            f"Underused: {smaller.name} is cheaper",
            text,
            model,
            facts,
            proposed,
            cpu_p95=cpu,
            memory_p95=memory,
            gpu_p95=gpu if facts.gpus else None,
        )
    ]


def _per(figures: dict[str, Any], unit: str) -> str:
    return (
        f"{_duration(figures['seconds_per_unit'])} and {figures['usd_per_unit']:.4g} USD per "
        f"{unit} on {figures['instance_type']}"
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def _parameter(data: dict[str, Any], section: str, key: str, default: float) -> float:
    found = data["sections"].get(section, {})
    for holder in (found.get("thresholds", {}), found):
        if isinstance(holder, dict) and key in holder:
            return float(holder[key])
    return default


def _samples(data: dict[str, Any]) -> float | None:
    ranks = data["sections"]["batch_size"].get("ranks", [])
    values = [r["samples_per_step"] for r in ranks if r.get("samples_per_step")]
    return float(values[0]) if values else None


def _family(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) == 3 else ""


def _next_larger(current: InstanceType, catalog: Catalog) -> InstanceType | None:
    """The smallest type of the same family with more vCPUs (any CPU type if none)."""
    cpu_types = [
        t for t in catalog.instance_types.values() if t.gpus == 0 and t.vcpus > current.vcpus
    ]
    same = [t for t in cpu_types if _family(t.name) == _family(current.name)]
    pool = same or cpu_types
    return min(pool, key=lambda t: (t.vcpus, t.on_demand_usd_per_hour)) if pool else None


def _cheapest_gpu(catalog: Catalog) -> InstanceType | None:
    gpus = [t for t in catalog.instance_types.values() if t.gpus > 0]
    return min(gpus, key=lambda t: t.on_demand_usd_per_hour) if gpus else None
