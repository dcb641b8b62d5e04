"""``disable_output_compression``: the model and the output data go up as files (SageMaker's
``OutputDataConfig.CompressionType: NONE``), under ``output/model/`` and ``output/data/``; with
several hosts the hosts' files are merged there, algo-1 winning a name clash."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.e2e._harness import describe, trainops, write_job

pytestmark = pytest.mark.slow

WRITER = """
import os
from pathlib import Path
host = os.environ["SM_CURRENT_HOST"]
model, data = Path(os.environ["SM_MODEL_DIR"]), Path(os.environ["SM_OUTPUT_DATA_DIR"])
(model / "sub").mkdir(parents=True, exist_ok=True)
(model / "common.txt").write_text(host)
(model / "sub" / f"{host}.bin").write_bytes(os.urandom(70_000))
(data / f"{host}.txt").write_text("report of " + host)
if os.environ.get("LINK"):
    (model / "latest").symlink_to("common.txt")
print("written", flush=True)
"""


def _files(prefix: Path) -> dict[str, bytes]:
    return {
        p.relative_to(prefix).as_posix(): p.read_bytes() for p in prefix.rglob("*") if p.is_file()
    }


def _run(tmp_path: Path, name: str, **spec: object) -> tuple[dict[str, object], Path]:
    job_yaml = write_job(tmp_path, WRITER, job_name=name, disable_output_compression=True, **spec)
    home = tmp_path / "home"
    result = trainops("run", str(job_yaml), home=home)
    assert result.returncode == 0, result.stdout + result.stderr
    job = describe(name, home)
    output = Path(urlparse(job["OutputDataConfig"]["S3OutputPath"]).path) / name / "output"
    return job, output


def test_one_host_uploads_its_model_and_data_as_files(tmp_path: Path) -> None:
    job, output = _run(tmp_path, "flat", environment={"LINK": "1"})
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert job["OutputDataConfig"]["CompressionType"] == "NONE"
    assert job["ModelArtifacts"]["S3ModelArtifacts"].endswith("/flat/output/model/")
    assert sorted(p.name for p in output.iterdir()) == ["data", "model"]  # no archive
    model = _files(output / "model")
    assert sorted(model) == ["common.txt", "sub/algo-1.bin"]
    assert len(model["sub/algo-1.bin"]) == 70_000
    assert _files(output / "data") == {"algo-1.txt": b"report of algo-1"}
    outputs = [a["Uri"] for a in job["Artifacts"] if a["Name"] == "output"]
    assert [uri.endswith("/flat/output/data/") for uri in outputs] == [True]
    # A link has no object to be: named in the log, not followed
    logs = trainops("logs", "flat", home=tmp_path / "home").stdout
    assert "'model/latest' is a symbolic link: not uploaded" in logs


def test_the_files_of_several_hosts_are_merged_with_algo_1_winning(tmp_path: Path) -> None:
    job, output = _run(tmp_path, "merged", instance_count=2)
    assert job["TrainingJobStatus"] == "Completed", job["FailureReason"]
    assert job["ModelArtifacts"]["S3ModelArtifacts"].endswith("/merged/output/model/")
    # The parts are gone (a file store keeps their emptied folders; S3 has none).
    assert {key.split("/")[0] for key in _files(output)} == {"data", "model"}
    model = _files(output / "model")
    assert sorted(model) == ["common.txt", "sub/algo-1.bin", "sub/algo-2.bin"]
    assert model["common.txt"] == b"algo-1"
    assert _files(output / "data") == {
        "algo-1.txt": b"report of algo-1",
        "algo-2.txt": b"report of algo-2",
    }
    names = {a["Name"] for a in job["Artifacts"]}
    assert "model" in names and "model_part" not in names
