"""A large model's upload at the end of a job: model.tar.gz against files (CompressionType NONE).

One job writes ``--mib`` MiB of model weights (4 files of random bytes: trained weights hardly
compress) to ``SM_MODEL_DIR`` and ends. Three paths, interleaved round by round with the order
rotating (A, B, C, then B, C, A, ...):

- ``gzip``:  the job as SageMaker runs it by default (``model.tar.gz``), through ``trainops run``;
- ``files``: the same job with ``disable_output_compression: true`` (the files themselves);
- ``cp``:    the limit: ``cp -r`` of a model folder written the same way, to the same object
             store's disk (the local ``file://`` store under the home), then ``sync`` of the
             copies (the store fsyncs each object before it becomes visible).

A job's figure is its ``Uploading`` phase (from ``SecondaryStatusTransitions``: the host's own
times, the archive made or the files copied, plus the host log); ``cp``'s is the copy alone.
Figures of merit, medians over the rounds: files / cp (target ≤ 1.25, the storage bench's) and
gzip / files (what not compressing saves). Results go to bench/results/output_upload.json and
the table in bench/README.md.

    python bench/output_upload.py [--mib 512] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _report import machine, update_section, write_json

SECTION = "output_upload"
PATHS = ("gzip", "files", "cp")
TARGET = 1.25
RESULT = Path(__file__).with_name("results") / "output_upload.json"
README = Path(__file__).with_name("README.md")

SCRIPT = """
import os, sys
model = os.environ.get("SM_MODEL_DIR") or sys.argv[1]
size = int(os.environ.get("MODEL_MIB") or sys.argv[2]) << 20
os.makedirs(model, exist_ok=True)
for part in range(4):
    with open(os.path.join(model, f"weights-{part}.bin"), "wb") as out:
        left = size // 4
        while left:
            chunk = min(left, 8 << 20)
            out.write(os.urandom(chunk))
            left -= chunk
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="model size in MiB (default 512)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    return parser.parse_args(argv)


def _job(folder: Path, mib: int, uncompressed: bool) -> Path:
    src = folder / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "train.py").write_text(SCRIPT)
    spec = {
        "job_name": "files" if uncompressed else "gzip",  # each run has a home of its own
        "entry_point": "train.py",
        "source_dir": "src",
        "environment": {"MODEL_MIB": str(mib)},
        "disable_output_compression": uncompressed,
    }
    path = folder / f"job-{'files' if uncompressed else 'gzip'}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _uploading_seconds(name: str, env: dict[str, str]) -> float:
    described = subprocess.run(
        [sys.executable, "-m", "trainops.cli", "describe", name, "--rest"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    job = json.loads(described.stdout)
    if job["TrainingJobStatus"] != "Completed":
        raise SystemExit(f"{name} ended {job['TrainingJobStatus']}: {job.get('FailureReason')}")
    [phase] = [t for t in job["SecondaryStatusTransitions"] if t["Status"] == "Uploading"]
    start, end = (dt.datetime.fromisoformat(phase[k]) for k in ("StartTime", "EndTime"))
    return (end - start).total_seconds()


def _run_job(job: Path, home: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINOPS_", "AWS_"))}
    env["TRAINOPS_HOME"] = str(home)
    subprocess.run(["sync"], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "trainops.cli", "run", str(job)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"trainops run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return _uploading_seconds(job.stem.removeprefix("job-"), env)


def _run_cp(work: Path, mib: int, round_no: int) -> float:
    model = work / f"cp-model-{round_no}"
    subprocess.run([sys.executable, "-c", SCRIPT, str(model), str(mib)], check=True)
    dest = work / "home-cp" / "objects" / f"copy-{round_no}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["sync"], check=True)
    started = time.perf_counter()
    subprocess.run(["cp", "-r", str(model), str(dest)], check=True)
    # ... and on disk, as the store makes each object durable before it is visible (fsync)
    subprocess.run(["sync", *(str(f) for f in sorted(dest.iterdir()))], check=True)
    seconds = time.perf_counter() - started
    shutil.rmtree(model)
    return seconds


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    samples: dict[str, list[float]] = {path: [] for path in PATHS}
    with tempfile.TemporaryDirectory(prefix="trainops-output-upload-", dir=Path.home()) as tmp:
        work = Path(tmp)
        jobs = {"gzip": _job(work, args.mib, False), "files": _job(work, args.mib, True)}
        for round_no in range(args.rounds):
            shift = round_no % len(PATHS)
            for path in PATHS[shift:] + PATHS[:shift]:
                if path == "cp":
                    seconds = _run_cp(work, args.mib, round_no)
                else:
                    seconds = _run_job(jobs[path], work / f"home-{path}-{round_no}")
                    shutil.rmtree(work / f"home-{path}-{round_no}")  # the disk, for the next
                samples[path].append(seconds)
                print(f"round {round_no + 1} {path}: {seconds:.2f} s", flush=True)
    result = _result(args, samples)
    write_json(result, RESULT)
    table = _table(result)
    update_section(README, SECTION, table)
    print(table)


def _result(args: argparse.Namespace, samples: dict[str, list[float]]) -> dict[str, Any]:
    median = {path: statistics.median(values) for path, values in samples.items()}
    return {
        "benchmark": SECTION,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "args": vars(args),
        "machine": machine(),
        "samples_s": samples,
        "median_s": median,
        "files_over_cp": median["files"] / median["cp"],
        "gzip_over_files": median["gzip"] / median["files"],
        "target_files_over_cp": TARGET,
    }


def _table(result: dict[str, Any]) -> str:
    mib = result["args"]["mib"]
    median = result["median_s"]
    rows = [
        "| path | seconds (median) | MB/s | against cp |",
        "|---|---:|---:|---:|",
    ]
    for path, label in (
        ("gzip", "`model.tar.gz` (the default)"),
        ("files", "files (`disable_output_compression`)"),
        ("cp", "`cp -r` + `sync` of the copies (the limit)"),
    ):
        rate = mib * (1 << 20) / 1e6 / median[path]
        rows.append(
            f"| {label} | {median[path]:.2f} | {rate:.0f} | {median[path] / median['cp']:.2f}x |"
        )
    machine_info = result["machine"]
    rows.append("")
    rows.append(
        f"{mib} MiB of weights (4 files), {len(result['samples_s']['cp'])} interleaved rounds, "
        f"measured {result['date']} on {machine_info['cpu_model']}, "
        f"{machine_info['usable_cores']} usable cores. files / cp = "
        f"**{result['files_over_cp']:.2f}** (target ≤ {TARGET}); gzip / files = "
        f"**{result['gzip_over_files']:.1f}x**. Raw samples: "
        "[results/output_upload.json](results/output_upload.json)."
    )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
