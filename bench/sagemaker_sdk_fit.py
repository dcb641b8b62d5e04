"""The SageMaker Python SDK v2's ``fit()`` of a hello job end to end against ``trainops server --s3``.

A hello-world ``PyTorch(...).fit({"train": "s3://..."}, wait=True, logs="All")`` is run by the
real SDK (2.257.x, the ``dev`` extra) in a child process that sees only the variables the server
prints (the ``trainops`` profile and ``SAGEMAKER_USER_CONFIG_OVERRIDE``), as a user runs it
(``_sdk_fit_driver.py``). Its time is split into phases, from wall-clock marks the driver takes
without changing the SDK (it wraps the SDK's upload, its client's CreateTrainingJob and stdout,
and polls DescribeTrainingJob from a thread):

- set-up: the child's start to the estimator built (Python start, ``import sagemaker``, the
  session and estimator);
- upload: the estimator built to the source tarball uploaded to the served S3;
- create: CreateTrainingJob's call to its answer;
- to InProgress / to Training: CreateTrainingJob's answer to the poller first reading
  ``InProgress`` and the secondary status ``Training``;
- to the first log line: CreateTrainingJob's answer to the script's line printed by the SDK
  (read from CloudWatch Logs by the SDK's own tailer);
- to Completed: CreateTrainingJob's answer to the poller reading ``Completed``;
- fit() returns: CreateTrainingJob's answer to ``fit()`` returning.

The floor, in the same rounds (interleaved: SDK then CLI, then CLI then SDK, ...): the same
hello script run by ``trainops run`` against the same server (``TRAINOPS_SERVER``), timed from
the command's start to its exit.

    python bench/sagemaker_sdk_fit.py [--rounds 5]
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
from importlib import metadata
from pathlib import Path
from typing import Any

from _processes import (
    BenchError,
    ProcessSweeper,
    compile_trainops,
    free_port,
    run_timed,
    tool,
    wait_until,
)
from _report import machine, update_section, versions, write_json

BENCH = Path(__file__).resolve().parent
HELLO = BENCH / "hello"
EXPECT = "hello from algo-1"
PHASES = {
    "setup_s": "set-up (Python start, import sagemaker, session, estimator)",
    "upload_s": "source upload to S3",
    "create_s": "CreateTrainingJob call",
    "to_in_progress_s": "CreateTrainingJob answered → InProgress",
    "to_training_s": "CreateTrainingJob answered → secondary status Training",
    "to_first_log_s": "CreateTrainingJob answered → script's first line printed by the SDK",
    "to_completed_s": "CreateTrainingJob answered → Completed",
    "to_fit_return_s": "CreateTrainingJob answered → fit() returns",
    "total_s": "fit() end to end (child start → fit() returns)",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per fit() or run")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "sagemaker_sdk_fit.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.timeout <= 0:
        parser.error("--timeout must be more than 0 seconds")
    return args


def clean_env() -> dict[str, str]:
    drop = ("TRAINOPS_", "AWS_", "RAY_", "SM_", "SAGEMAKER_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def sdk_env(home: Path) -> dict[str, str]:
    """The variables the server's banner prints, and nothing else of AWS's."""
    aws = home / "aws"
    return {
        **clean_env(),
        "AWS_SHARED_CREDENTIALS_FILE": str(aws / "credentials"),
        "AWS_CONFIG_FILE": str(aws / "config"),
        "AWS_PROFILE": "trainops",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(aws / "sagemaker.yaml"),
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "PYTHONUNBUFFERED": "1",
    }


def start_server(sweeper: ProcessSweeper, workdir: Path) -> tuple[Path, str]:
    """``trainops server --s3`` on loopback; the SDK's image maps to a bare venv's Python."""
    venv = workdir / "torch23"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    home, port = workdir / "home", free_port()
    env = {
        **clean_env(),
        "TRAINOPS_HOME": str(home),
        "TRAINOPS_S3_SERVE": "1",
        "TRAINOPS_IMAGES": f"pytorch:2.3={venv / 'bin' / 'python'}",
    }
    argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
    log = workdir / "server.log"
    proc = sweeper.spawn(argv, env, log)
    ready = (home / "aws" / "sagemaker.yaml", home / "aws" / "credentials")
    wait_until(lambda: all(p.is_file() for p in ready), "trainops server --s3", proc, log, 180)
    return home, f"http://127.0.0.1:{port}"


def put_train_data(home: Path) -> str:
    """One object under the ``train`` channel's prefix (not timed)."""
    code = (
        "import boto3; boto3.Session().client('s3').put_object("
        "Bucket='trainops', Key='data/train/part-0', Body=b'1')"
    )
    deadline = time.monotonic() + 120
    while True:  # the served S3 may still be starting when the profile is written
        done = subprocess.run(
            [sys.executable, "-c", code], env=sdk_env(home), capture_output=True, text=True
        )
        if done.returncode == 0:
            return "s3://trainops/data/train/"
        if time.monotonic() > deadline:
            raise BenchError(f"put the train data: {done.stderr[-2000:]}")
        time.sleep(1)


def sdk_fit(home: Path, source: Path, train: str, timeout: float) -> dict[str, Any]:
    driver = BENCH / "_sdk_fit_driver.py"
    argv = [sys.executable, str(driver), str(source), train]
    done = subprocess.run(
        argv, env=sdk_env(home), capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0 or EXPECT not in done.stdout:
        raise BenchError(
            f"SDK fit(): exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["status"] != "Completed":
        raise BenchError(f"SDK fit(): the job ended {result['status']}")
    return phases(result)


def phases(result: dict[str, Any]) -> dict[str, Any]:
    marks, seen = result["marks"], result["seen"]
    answered = marks["create_end"]
    return {
        "setup_s": marks["estimator_ready"] - marks["process_start"],
        "import_s": marks["imported"] - marks["process_start"],
        "upload_s": marks["upload_end"] - marks["upload_start"],
        "create_s": marks["create_end"] - marks["create_start"],
        "to_in_progress_s": seen["InProgress"] - answered,
        "to_training_s": seen["Training"] - answered if "Training" in seen else None,
        "to_first_log_s": marks["first_log_line"] - answered,
        "to_completed_s": seen["Completed"] - answered,
        "to_fit_return_s": marks["fit_returned"] - answered,
        "total_s": marks["fit_returned"] - marks["process_start"],
        "job_run_s": result["job"]["TrainingEndTime"] - result["job"]["TrainingStartTime"],
    }


def cli_run(sweeper: ProcessSweeper, home: Path, url: str, timeout: float) -> float:
    argv = [*tool("trainops"), "run", str(HELLO / "hello.yaml")]
    env = {**clean_env(), "TRAINOPS_HOME": str(home), "TRAINOPS_SERVER": url}
    return run_timed(argv, env, sweeper, EXPECT, timeout)


def measure(args: argparse.Namespace, sweeper: ProcessSweeper, workdir: Path) -> dict[str, Any]:
    home, url = start_server(sweeper, workdir)
    train = put_train_data(home)
    source = workdir / "src"
    source.mkdir()
    shutil.copy(HELLO / "hello.py", source / "hello.py")
    sdk_fit(home, source, train, args.timeout)  # warm-up: page cache, the first image venv
    cli_run(sweeper, home, url, args.timeout)
    sdk: list[dict[str, Any]] = []
    cli: list[float] = []
    for index in range(args.rounds):
        for which in ("sdk", "cli") if index % 2 == 0 else ("cli", "sdk"):
            if which == "sdk":
                sdk.append(sdk_fit(home, source, train, args.timeout))
            else:
                cli.append(cli_run(sweeper, home, url, args.timeout))
        print(
            f"round {index + 1}/{args.rounds}: fit() {sdk[-1]['total_s']:.2f} s, "
            f"trainops run {cli[-1]:.2f} s",
            flush=True,
        )
    return {"sdk": sdk, "trainops_run_s": cli}


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    keys = [*PHASES, "import_s", "job_run_s"]
    sdk = {
        k: statistics.median(v)
        for k in keys
        if (v := [s[k] for s in raw["sdk"] if s[k] is not None])
    }
    return {"sdk_median": sdk, "trainops_run_median_s": statistics.median(raw["trainops_run_s"])}


def render_table(result: dict[str, Any]) -> str:
    summary, raw = result["summary"], result["samples"]
    sdk = summary["sdk_median"]
    rows = [
        "| phase (SDK v2 `fit()` against `trainops server --s3`) | median (s) | min-max (s) |",
        "|---|---:|---:|",
    ]
    for key, label in PHASES.items():
        values = [s[key] for s in raw["sdk"] if s[key] is not None]
        if values:
            rows.append(f"| {label} | {sdk[key]:.2f} | {min(values):.2f}-{max(values):.2f} |")
    cli = raw["trainops_run_s"]
    rows.append(
        f"| floor: `trainops run hello.yaml` against the same server | "
        f"{summary['trainops_run_median_s']:.2f} | {min(cli):.2f}-{max(cli):.2f} |"
    )
    m, v = result["machine"], result["versions"]
    rows.append("")
    rows.append(
        f"Of the set-up, `import sagemaker` and Python's start: {sdk['import_s']:.2f} s; the job's "
        f"own run (TrainingStartTime → TrainingEndTime): {sdk['job_run_s']:.2f} s. "
        f"Measured {result['date']} on {m['cpu_model']} ({m['usable_cores']} usable cores), "
        f"load average {result['load_average'][0]:.1f} at the start and "
        f"{result['load_average_end'][0]:.1f} at the end; sagemaker {v.get('sagemaker')}, "
        f"trainops {v.get('trainops')}; median of {result['rounds']} interleaved rounds after one "
        "warm-up round. Raw samples: [results/sagemaker_sdk_fit.json](results/sagemaker_sdk_fit.json)."
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_trainops()
    workdir = Path(tempfile.mkdtemp(prefix="tob-sdk-fit-", dir="/tmp"))
    sweeper = ProcessSweeper()
    load = os.getloadavg()
    try:
        raw = measure(args, sweeper, workdir)
    except (BenchError, subprocess.TimeoutExpired) as exc:
        print(f"sagemaker_sdk_fit: {exc}", file=sys.stderr)
        return 1
    finally:
        sweeper.stop_all()
    found = versions()
    found["sagemaker"] = metadata.version("sagemaker")
    result = {
        "benchmark": "sagemaker_sdk_fit",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "machine": machine(),
        "load_average": load,
        "load_average_end": os.getloadavg(),
        "versions": found,
        "samples": raw,
        "summary": summarise(raw),
    }
    write_json(result, args.out)
    update_section(args.readme, "sagemaker_sdk_fit", render_table(result))
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
