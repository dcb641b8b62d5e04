"""Hostile or ported specs end as one error block from the CLI: field, file and line, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spec.test_strict_yaml import alias_bomb

CASES: dict[str, tuple[str | bytes, str]] = {
    "alias bomb": (alias_bomb(), "  <spec>: line 7, column "),
    "duplicate key": (
        "entry_point: train.py\nhyperparameters: {lr: 1, lr: 2}\n",
        "  hyperparameters.lr (line 2): duplicate key (first on line 2)",
    ),
    "sdk argument": ("entry_point: train.py\nmetrics: 60\n", "  metrics (line 2): unknown field"),
    "infinite hyperparameter": (
        "entry_point: train.py\nhyperparameters:\n  a: .inf\n",
        "  hyperparameters.a (line 3): contains inf or nan",
    ),
    "dot channel": ("entry_point: train.py\ninputs: {'..': data/}\n", "  inputs (line 2): channel"),
    "huge hyperparameters": (
        "entry_point: train.py\nhyperparameters:\n"
        + "".join(f"  h{i}: {'x' * 2490}\n" for i in range(100)),
        "  hyperparameters (line 2): too large to pass to the script",
    ),
    "not UTF-8": (
        b"entry_point: train.py\nbase_job_name: \xff\xfe\n",
        "  <spec>: line 2: not UTF-8 text (byte 0xff at byte offset 37)",
    ),
    "number as a field name": (
        "entry_point: train.py\n1: x\n",
        "  1 (line 2): a field name must be text, not int 1",
    ),
    "NUL in entry_point": (
        'entry_point: "train\\0.py"\n',
        "  entry_point (line 1): must not contain a NUL character",
    ),
    "NUL in source_dir": (
        'entry_point: train.py\nsource_dir: "s\\0rc"\n',
        "  source_dir (line 2): must not contain a NUL character",
    ),
    "NUL in a checkpoint URI": (
        'entry_point: train.py\ncheckpoint: {uri: "c\\0k"}\n',
        "  checkpoint.uri (line 2): must not contain a NUL character",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_prints_the_problem_and_exits_2(tmp_path: Path, case: str) -> None:
    text, expected = CASES[case]
    if isinstance(text, bytes):
        (tmp_path / "bad.yaml").write_bytes(text)
    else:
        (tmp_path / "bad.yaml").write_text(text)
    (tmp_path / "train.py").write_text("print('never runs')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "AWS_"))}
    env["TRAINOPS_HOME"] = str(tmp_path / "home")
    result = subprocess.run(
        [sys.executable, "-m", "trainops.cli", "run", "bad.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "trainops: error: invalid job spec in bad.yaml:"
    assert len(lines) == 2 and lines[1].startswith(expected), result.stderr
    assert not (tmp_path / "home").exists()
