"""The SageMaker API's throughput: boto3 against ``trainops server`` and against moto's server.

moto answers the same API with static fakes (a created job is stored, never run); trainops
validates each request against the botocore model, verifies its SigV4 signature, and a created
job is a real job (a hello script queued, placed and run). Both servers are started once, on
loopback, and driven by one boto3 ``sagemaker`` client each, one call at a time, from this
process. The run is interleaved: ``--rounds`` rounds, each making a block of DescribeTrainingJob
calls and a block of CreateTrainingJob calls against one server, then the other (the order
alternates round by round: A, B, then B, A), ``--describes`` and ``--creates`` calls in all per
server (default 1,000 and 100). Each call is timed on its own (``perf_counter`` around the
boto3 call): requests per second = calls / the sum of their times, and the p50 and p99 of the
latencies. The jobs trainops runs keep the machine busy while both servers are measured.

    python bench/sagemaker_api.py [--describes 1000] [--creates 100] [--rounds 10]

moto comes with the ``bench`` extra (``pip install -e '.[bench]'``); ``--moto-python`` runs
its server with another interpreter (one with ``moto[server]`` installed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _processes import BenchError, ProcessSweeper, compile_trainops, free_port, tool, wait_until
from _report import machine, update_section, versions, write_json

BENCH = Path(__file__).resolve().parent
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311"
HELLO = "print('hello from a SageMaker API job', flush=True)\n"
TARGETS = ("trainops", "moto")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--describes", type=int, default=1000, help="calls per server")
    parser.add_argument("--creates", type=int, default=100, help="calls per server")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument("--moto-python", default=sys.executable, help="runs moto's server")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "sagemaker_api.json")
    parser.add_argument("--readme", type=Path, default=BENCH / "README.md")
    args = parser.parse_args(argv)
    if min(args.describes, args.creates, args.rounds) < 1:
        parser.error("--describes, --creates and --rounds must be at least 1")
    if args.describes % args.rounds or args.creates % args.rounds:
        parser.error("--describes and --creates must be multiples of --rounds")
    return args


def clean_env() -> dict[str, str]:
    drop = ("TRAINOPS_", "AWS_", "RAY_", "SM_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def start_trainops(sweeper: ProcessSweeper, workdir: Path) -> tuple[str, dict[str, str]]:
    """A ``trainops server`` on a loopback port; its URL and the key of its ``trainops`` profile."""
    home, port = workdir / "home", free_port()
    argv = [*tool("trainops"), "server", "--host", "127.0.0.1", "--port", str(port)]
    log = workdir / "trainops-server.log"
    proc = sweeper.spawn(argv, {**clean_env(), "TRAINOPS_HOME": str(home)}, log)
    credentials = home / "aws" / "credentials"
    wait_until(lambda: credentials.exists(), "trainops server", proc, log, 60)
    pairs = dict(
        line.split(" = ", 1) for line in credentials.read_text().splitlines() if " = " in line
    )
    key = {"id": pairs["aws_access_key_id"], "secret": pairs["aws_secret_access_key"]}
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _answers(client(url, key)), "trainops server", proc, log, 60)
    return url, key


def start_moto(sweeper: ProcessSweeper, workdir: Path, python: str) -> tuple[str, dict[str, str]]:
    """moto's server (``python -m moto.server``) on a loopback port; any key will do."""
    port = free_port()
    argv = [python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    log = workdir / "moto-server.log"
    proc = sweeper.spawn(argv, clean_env(), log)
    url, key = f"http://127.0.0.1:{port}", {"id": "AKIDMOTO", "secret": "moto-secret"}
    wait_until(lambda: _answers(client(url, key)), "moto server", proc, log, 60)
    return url, key


def client(url: str, key: dict[str, str]) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "sagemaker",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key["id"],
        aws_secret_access_key=key["secret"],
        config=Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


def _answers(sagemaker: Any) -> bool:
    try:
        sagemaker.list_training_jobs(MaxResults=1)
    except Exception:  # (not up yet: refused connection, or a server still starting)
        return False
    return True


def code_tarball(workdir: Path) -> str:
    """The jobs' ``sourcedir.tar.gz`` (a hello script) as a file:// URI both servers accept."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = len(HELLO)
        tar.addfile(info, io.BytesIO(HELLO.encode()))
    path = workdir / "sourcedir.tar.gz"
    path.write_bytes(buffer.getvalue())
    return path.as_uri()


def create_request(name: str, code: str, workdir: Path) -> dict[str, Any]:
    """What the SDK v2's PyTorch estimator sends, less the S3 of a real account."""
    return {
        "TrainingJobName": name,
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "HyperParameters": {
            "sagemaker_program": json.dumps("train.py"),
            "sagemaker_submit_directory": json.dumps(code),
        },
        "OutputDataConfig": {"S3OutputPath": (workdir / "output").as_uri()},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }


def timed(calls: int, call: Callable[[int], Any]) -> list[float]:
    samples = []
    for index in range(calls):
        start = time.perf_counter()
        call(index)
        samples.append(time.perf_counter() - start)
    return samples


def figures(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "calls": len(samples),
        "requests_per_s": len(samples) / sum(samples),
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
    }


def block(
    sagemaker: Any, describes: int, creates: int, first: int, code: str, workdir: Path
) -> Any:
    """One server's share of a round: its describes, then its creates (jobs ``made-<first>``...)."""
    described = timed(
        describes, lambda _: sagemaker.describe_training_job(TrainingJobName="described")
    )
    made = timed(
        creates,
        lambda i: sagemaker.create_training_job(
            **create_request(f"made-{first + i}", code, workdir)
        ),
    )
    return described, made


def measure(args: argparse.Namespace, servers: dict[str, Any], workdir: Path) -> dict[str, Any]:
    code = code_tarball(workdir)
    raw: dict[str, dict[str, list[float]]] = {t: {"describe": [], "create": []} for t in TARGETS}
    for sagemaker in servers.values():  # the job every describe reads, and a warm-up
        sagemaker.create_training_job(**create_request("described", code, workdir))
        block(sagemaker, 10, 0, 0, code, workdir)
    describes, creates = args.describes // args.rounds, args.creates // args.rounds
    for index in range(args.rounds):
        order = TARGETS if index % 2 == 0 else TARGETS[::-1]
        for target in order:
            described, made = block(
                servers[target], describes, creates, index * creates, code, workdir
            )
            raw[target]["describe"] += described
            raw[target]["create"] += made
        print(f"round {index + 1}/{args.rounds} done", flush=True)
    return raw


def trainops_outcomes(sagemaker: Any, expected: int, timeout: float = 600) -> dict[str, int]:
    """Wait until the ``expected`` jobs trainops was asked for have ended; count them by status
    (the work behind each CreateTrainingJob: every job must have run to Completed)."""
    deadline = time.monotonic() + timeout
    while True:
        statuses: dict[str, int] = {}
        for page in sagemaker.get_paginator("list_training_jobs").paginate(MaxResults=100):
            for job in page["TrainingJobSummaries"]:
                status = job["TrainingJobStatus"]
                statuses[status] = statuses.get(status, 0) + 1
        ended = sum(n for s, n in statuses.items() if s != "InProgress" and s != "Stopping")
        if ended >= expected or time.monotonic() > deadline:
            return statuses
        time.sleep(1)


def summarise(raw: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {
        target: {op: figures(samples) for op, samples in ops.items()} for target, ops in raw.items()
    }
    summary["ratio_trainops_to_moto"] = {
        op: summary["trainops"][op]["requests_per_s"] / summary["moto"][op]["requests_per_s"]
        for op in ("describe", "create")
    }
    return summary


def render_table(result: dict[str, Any]) -> str:
    summary = result["summary"]
    rows = [
        "| operation | server | calls | requests/s | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|",
    ]
    for op, name in (("describe", "DescribeTrainingJob"), ("create", "CreateTrainingJob")):
        for target in TARGETS:
            f = summary[target][op]
            rows.append(
                f"| {name} | {target} | {f['calls']} | {f['requests_per_s']:.0f} | "
                f"{f['p50_ms']:.1f} | {f['p99_ms']:.1f} |"
            )
    ratio = summary["ratio_trainops_to_moto"]
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(result["trainops_job_statuses"].items()))
    rows.append("")
    rows.append(f"The jobs trainops was asked to create ran: {statuses}.")
    rows.append("")
    rows.append(
        f"trainops/moto requests per second: describe {ratio['describe']:.2f}x, create "
        f"{ratio['create']:.2f}x (target: at least 1x). Measured {result['date']} on "
        f"{result['machine']['cpu_model']} ({result['machine']['usable_cores']} usable cores), "
        f"moto {result['moto_version']}, boto3 {result['versions'].get('boto3')}."
    )
    return "\n".join(rows)


def moto_version(python: str) -> str:
    import subprocess

    code = "import importlib.metadata as m; print(m.version('moto'))"
    answer = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return answer.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compile_trainops()
    workdir = Path(tempfile.mkdtemp(prefix="tob-sagemaker-api-", dir="/tmp"))
    sweeper = ProcessSweeper()
    try:
        servers = {
            "trainops": client(*start_trainops(sweeper, workdir)),
            "moto": client(*start_moto(sweeper, workdir, args.moto_python)),
        }
        raw = measure(args, servers, workdir)
        outcomes = trainops_outcomes(servers["trainops"], args.creates + 1)
    except BenchError as exc:
        print(f"sagemaker_api: {exc}", file=sys.stderr)
        return 1
    finally:
        sweeper.stop_all()
    found = versions()
    import boto3

    found["boto3"] = boto3.__version__
    result = {
        "benchmark": "sagemaker_api",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "rounds": args.rounds,
        "machine": machine(),
        "versions": found,
        "moto_version": moto_version(args.moto_python),
        "trainops_job_statuses": outcomes,
        "samples_s": raw,
        "summary": summarise(raw),
    }
    write_json(result, args.out)
    update_section(args.readme, "sagemaker_api", render_table(result))
    print(json.dumps(result["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
