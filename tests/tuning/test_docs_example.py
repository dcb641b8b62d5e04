"""docs/tuning.md's library example runs on its own tuning file and prints what the page shows."""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _blocks(kind: str) -> list[str]:
    text = (ROOT / "docs" / "tuning.md").read_text(encoding="utf-8")
    return re.findall(rf"```{kind}\n(.*?)```\n", text, re.DOTALL)


def test_the_pages_example_prints_its_shown_output(
    optuna: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tune = _blocks("yaml")[0]
    script = next(block for block in _blocks("python") if "Search(config)" in block)
    shown = next(block for block in _blocks("text") if "MaxNumberOfTrainingJobsReached" in block)
    (tmp_path / "tune.yaml").write_text(tune.replace("training_job: job.yaml", _INLINE_JOB))
    (tmp_path / "train.py").write_text("")
    (tmp_path / "example.py").write_text(script)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(tmp_path / "example.py"))
    assert capsys.readouterr().out == shown


_INLINE_JOB = """training_job:
  entry_point: train.py
  hyperparameters: {epochs: 9}
  metric_definitions: [{name: val_loss, regex: 'val_loss=([0-9.]+)'}]"""
