"""docs/tuning.md's Python section runs as shown: its script, its tuner, its printed output."""

from __future__ import annotations

import re
import runpy
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.system import require_extra
from trainops.sdk._session import close_sessions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = (ROOT / "docs" / "tuning.md").read_text(encoding="utf-8")
    return text[text.index("## In Python") : text.index("## The search as a library")]


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```\n", _section(), re.DOTALL)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        close_sessions()


def test_the_python_section_prints_its_shown_output(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_extra("tuning")
    require_extra("analytics")
    script, example = _blocks("python")
    (shown,) = _blocks("text")
    (workdir / "train.py").write_text(script)
    (workdir / "example.py").write_text(example)
    runpy.run_path(str(workdir / "example.py"))
    assert capsys.readouterr().out == shown
