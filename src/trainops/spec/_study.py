"""The scaling-study spec: one job spec, run over a list of resource configurations.

```yaml
job: job.yaml                      # a job spec, relative to this file
configurations:                    # instance_type defaults to the job's
  - {instance_count: 1, processes_per_host: 1}
  - {instance_count: 2, processes_per_host: 2}
throughput_metric: samples_per_sec # the job's metric of samples per second, over all ranks
target: {metric: test_accuracy, value: 0.95}   # time to the first point at or past it
plot: scaling.png                  # relative to this file
deadline_seconds: 600              # the cheapest configuration in time, on-demand and at spot
spot_overhead: 0.1                 # the share of time spot's interruptions add (default 10 %)
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from trainops._errors import SpecError
from trainops.spec._base import SpecModel
from trainops.spec._distribution import MAX_PROCESSES_PER_HOST
from trainops.spec._lines import read_spec_text, read_spec_yaml, with_line

__all__ = ["StudyConfiguration", "StudySpec", "StudyTarget", "load_study"]

MAX_CONFIGURATIONS = 32
MAX_DEADLINE_SECONDS = 28 * 86400  # SageMaker's longest run
# An assumption, said wherever it is used: interruptions make a spot run about 10 % longer.
# `trainops cost` measures a spot job's own (its Overhead); a study file can give it.
DEFAULT_SPOT_OVERHEAD = 0.1


class StudyConfiguration(SpecModel):
    """One point of the study: where the job runs and how many processes each host starts."""

    instance_type: str | None = None
    instance_count: int = Field(default=1, ge=1, le=64)
    processes_per_host: int = Field(default=1, ge=1, le=MAX_PROCESSES_PER_HOST)

    def label(self, default_type: str) -> str:
        kind = self.instance_type or default_type
        return f"{self.instance_count} x {kind}, {self.processes_per_host}/host"


class StudyTarget(SpecModel):
    """A quality to reach: time to the first point of ``metric`` at or past ``value``."""

    metric: str = Field(min_length=1, max_length=255)
    value: float
    goal: Literal["maximize", "minimize"] = "maximize"


class StudySpec(SpecModel):
    """A scaling study: the job, the configurations, and what to measure."""

    job: str = Field(min_length=1)
    configurations: list[StudyConfiguration] = Field(min_length=1)
    throughput_metric: str = Field(default="samples_per_sec", min_length=1, max_length=255)
    target: StudyTarget | None = None
    plot: str | None = "scaling.png"
    deadline_seconds: float | None = Field(default=None, gt=0, le=MAX_DEADLINE_SECONDS)
    spot_overhead: float = Field(default=DEFAULT_SPOT_OVERHEAD, ge=0, le=10)

    @field_validator("configurations")
    @classmethod
    def _configurations(cls, value: list[StudyConfiguration]) -> list[StudyConfiguration]:
        if len(value) > MAX_CONFIGURATIONS:
            raise ValueError(f"{len(value)} configurations; at most {MAX_CONFIGURATIONS}")
        return value

    @field_validator("plot")
    @classmethod
    def _plot(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().endswith(".png"):
            raise ValueError("must name a .png file")
        return value


def load_study(path: str | Path) -> StudySpec:
    """Read and validate a study file; problems name the field and its line."""
    path = Path(path)
    source = str(path)
    data, lines = read_spec_yaml(
        read_spec_text(path), source, "the study must be a mapping, e.g. 'job: job.yaml'"
    )
    try:
        return StudySpec(**data)
    except SpecError as exc:
        raise SpecError([(with_line(p, lines), r) for p, r in exc.problems], source) from None
