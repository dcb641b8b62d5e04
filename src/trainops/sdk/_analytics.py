"""``HyperparameterTuningJobAnalytics``: a tuning job's trials as a pandas DataFrame.

As the SageMaker SDK's ``sagemaker.analytics.HyperparameterTuningJobAnalytics``: one row per
trial, one column per tuned hyperparameter (a float where the value reads as one), then
``TrainingJobName``, ``TrainingJobStatus``, ``FinalObjectiveValue``, ``TrainingStartTime``,
``TrainingEndTime`` (timezone-aware datetimes, as boto3 gives them) and
``TrainingElapsedTimeSeconds``. The SDK leaves the elapsed-time column out when no trial has both
times; here it is always there (empty for a trial still running).

It reads through the running server, or with none the home's store directly: no control plane
is started to read. pandas (the ``analytics`` extra) is imported by ``dataframe()`` only.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from trainops._errors import TrainopsError
from trainops._settings import Settings
from trainops.client import analytics_rows, read_tuning

__all__ = ["HyperparameterTuningJobAnalytics", "import_pandas"]

_INSTALL_HINT = "tuning analytics need pandas: pip install 'trainops[analytics]'"
_TIMES = ("TrainingStartTime", "TrainingEndTime")


def import_pandas() -> Any:
    """The ``pandas`` module, or a TrainopsError that says how to install it."""
    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise TrainopsError(_INSTALL_HINT) from None


class HyperparameterTuningJobAnalytics:
    """The trials of tuning job ``hyperparameter_tuning_job_name``; what is read is cached until
    ``clear_cache()`` or a ``force_refresh``."""

    def __init__(
        self, hyperparameter_tuning_job_name: str, settings: Settings | None = None
    ) -> None:
        self.name = hyperparameter_tuning_job_name
        self._settings = settings
        self._description: dict[str, Any] | None = None
        self._dataframe: Any = None

    def __repr__(self) -> str:
        return f"<HyperparameterTuningJobAnalytics for {self.name}>"

    def clear_cache(self) -> None:
        """Forget what was read: the next call reads the tuning job again."""
        self._description = None
        self._dataframe = None

    def description(self, force_refresh: bool = False) -> dict[str, Any]:
        """The tuning job as DescribeHyperParameterTuningJob gives it (with its trials)."""
        if force_refresh:
            self.clear_cache()
        if self._description is None:
            with read_tuning(self._settings) as reader:
                self._description = reader.describe_tuning_job(self.name)
        return self._description

    def training_job_summaries(self, force_refresh: bool = False) -> list[dict[str, Any]]:
        """The trials as ``HyperParameterTrainingJobSummary`` items, in trial order."""
        found: list[dict[str, Any]] = self.description(force_refresh).get("TrainingJobs", [])
        return found

    @property
    def tuning_ranges(self) -> dict[str, dict[str, Any]]:
        """Each tuned hyperparameter's range as the API describes it, by name."""
        ranges = self.description()["HyperParameterTuningJobConfig"]["ParameterRanges"]
        return {item["Name"]: item for kind in ranges.values() for item in kind}

    def dataframe(self, force_refresh: bool = False) -> Any:
        """A ``pandas.DataFrame``: one row per trial, the SDK's columns (see the module)."""
        if force_refresh:
            self.clear_cache()
        if self._dataframe is None:
            pandas = import_pandas()
            columns, rows = analytics_rows(self.description())
            for row in rows:
                for key in _TIMES:
                    row[key] = _datetime(row[key])
            self._dataframe = pandas.DataFrame(rows, columns=columns)
        return self._dataframe

    def export_csv(self, filename: str | Path) -> None:
        """Write :meth:`dataframe` to ``filename`` as CSV (as the SDK's ``export_csv``), whole or
        not at all (through a temporary file beside it)."""
        path = Path(filename)
        text: str = self.dataframe().to_csv()
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as handle:
            handle.write(text)
        try:
            os.replace(handle.name, path)
        except OSError:
            os.unlink(handle.name)
            raise


def _datetime(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)
