"""A project, its data and the home in folders whose names have spaces: the job reads its
channel and its artifacts are where its URIs say (a ``file://`` URI's path is read as written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e._harness import trainops, write_job

pytestmark = pytest.mark.slow

LISTS_ITS_CHANNEL = """
import os
print("train holds", sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])))
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("m")
"""


def test_folders_with_spaces_work_end_to_end(tmp_path: Path) -> None:
    project = tmp_path / "my project"
    (project / "my data").mkdir(parents=True)
    (project / "my data" / "part 0.txt").write_text("1\n")
    spec = write_job(project, LISTS_ITS_CHANNEL, job_name="spaces", inputs={"train": "my data/"})
    home = tmp_path / "my home"
    result = trainops("run", str(spec), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[algo-1] train holds ['part 0.txt']" in result.stdout
    described = json.loads(trainops("describe", "spaces", home=home).stdout)
    model = described["ModelArtifacts"]["S3ModelArtifacts"]
    assert model.startswith(f"file://{home}/objects/jobs/spaces/")
    assert Path(model.removeprefix("file://")).is_file()
