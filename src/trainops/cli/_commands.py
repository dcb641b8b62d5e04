"""The CLI commands other than ``run``: each takes the parsed arguments and returns an exit code."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from trainops._errors import ConfigError, TrainopsError
from trainops._settings import Settings
from trainops.cli._render import (
    format_cluster_table,
    format_jobs_table,
    format_metrics_csv,
    format_metrics_table,
    format_rule_statuses,
)
from trainops.client import (
    JobFollower,
    JobReader,
    connect,
    format_log_line,
    format_transition,
    page_lines,
    read_jobs,
    resolve_job_name,
    running_server,
    submit_spec,
)
from trainops.spec import load_raw_spec

__all__ = [
    "NoSuchThingError",
    "chaos",
    "describe",
    "flush_output",
    "jobs",
    "logs",
    "metrics",
    "print_line",
    "print_lines",
    "print_transition",
    "server",
    "stop",
    "submit",
]

PAGE = 1000
NEEDS_SERVER = (
    "`trainops submit` needs a running server that outlives it (it returns at once, and a job "
    "needs a control plane until it ends): start one with `trainops server` (every command of "
    "the same TRAINOPS_HOME finds it) or set TRAINOPS_SERVER to another one, or use "
    "`trainops run SPEC`, which runs the job under an embedded server and follows it to its end"
)


class NoSuchThingError(TrainopsError):
    """The job has no host or metric of that name (an empty answer would look like success)."""


def submit(args: argparse.Namespace) -> int:
    spec = load_raw_spec(args.spec)
    settings = Settings.load()
    if not settings.server_url and running_server(settings) is None:
        spec.check()  # a spec's problems come before the missing server
        raise ConfigError(NEEDS_SERVER)
    with connect(settings) as client:
        name = submit_spec(client, spec, settings)
    print(name)
    return 0


def jobs(args: argparse.Namespace) -> int:
    with read_jobs() as client:
        found = client.list_jobs(
            status=args.status, name_contains=args.name_contains, limit=args.limit
        )
    print(format_jobs_table(found))
    return 0


def cluster(_args: argparse.Namespace) -> int:
    with connect() as client:
        found = client.cluster()
    print(format_cluster_table(found))
    return 0


def describe(args: argparse.Namespace) -> int:
    with read_jobs() as client:
        name = resolve_job_name(client, args.name)
        description = client.describe(name, shape="rest" if args.rest else "sagemaker")
    print(json.dumps(description, indent=2))
    rules = format_rule_statuses(description)
    if rules is not None:  # for people; standard output stays one JSON document
        print(rules, file=sys.stderr)
    return 0


def logs(args: argparse.Namespace) -> int:
    if args.follow:  # following needs a control plane: the job may still be running
        with connect() as client:
            name = _named(client, args.name, args.host)
            follower = JobFollower(client, name, print_line, host=args.host, on_lines=print_lines)
            follower.on_page = flush_output
            follower.follow()
        return 0
    with read_jobs() as reader:
        name = _named(reader, args.name, args.host)
        after = 0
        while True:
            reply = reader.logs(name, after=after, host=args.host, limit=PAGE, runs=True)
            lines = page_lines(reply)
            if not lines:  # a page may be short of PAGE lines (a size cap): not the end
                return 0
            print_lines(lines)
            flush_output()
            after = int(reply["next"])


def _named(reader: JobReader, text: str, host: str | None) -> str:
    """The whole name of the job ``text`` names, checked to have ``host`` if one is asked for."""
    name = resolve_job_name(reader, text)
    if host is not None:
        _check_host(reader.describe(name), host)
    return name


def metrics(args: argparse.Namespace) -> int:
    with read_jobs() as client:
        name = resolve_job_name(client, args.name)
        points = client.metrics(name, args.metric)
        if args.metric and not points:
            _check_metric(client.describe(name), args.metric)
    text = format_metrics_csv(points) if args.csv else format_metrics_table(points) + "\n"
    sys.stdout.write(text)
    return 0


def stop(args: argparse.Namespace) -> int:
    with connect() as client:
        name = resolve_job_name(client, args.name)
        description = client.stop(name)
        print(f"{name}: {description['TrainingJobStatus']}", flush=True)
        if args.wait:
            final = JobFollower(client, name, _skip, print_transition).follow()
            print(f"{name}: {final['TrainingJobStatus']}")
    return 0


def chaos(args: argparse.Namespace) -> int:
    """``trainops chaos interrupt NAME``: a rehearsal spot interruption of a running spot job."""
    with connect() as client:
        name = resolve_job_name(client, args.name)
        description = client.interrupt_job(
            name, hosts=args.host, capacity_gap_seconds=args.gap, notice_seconds=args.notice
        )
        transitions = description.get("SecondaryStatusTransitions") or [{}]
        message = transitions[-1].get("StatusMessage", "")
        print(f"{name}: {description['SecondaryStatus']}: {message}", flush=True)
    return 0


def _serving_s3(settings: Settings) -> Settings:
    """``--s3``: the server starts its own S3 server, unless an S3 endpoint is configured."""
    from trainops.storage._seaweed import read_client_file

    configured = settings.s3.endpoint_url
    if configured and read_client_file(settings.home) is None:
        raise ConfigError(
            f"--s3 starts trainops' own S3 server, but an S3 endpoint is configured "
            f"({configured[:80]}, s3.endpoint_url or AWS_ENDPOINT_URL_S3): keep one of them"
        )
    s3 = dataclasses.replace(settings.s3, endpoint_url=None, serve=True)
    return dataclasses.replace(settings, s3=s3)


def server(args: argparse.Namespace) -> int:
    from trainops.server import serve

    settings = Settings.load()
    if args.backend:
        settings = dataclasses.replace(settings, backend=args.backend)
    if args.ray_address:
        ray = dataclasses.replace(settings.ray, address=args.ray_address)
        settings = dataclasses.replace(settings, ray=ray)
    if args.s3:
        settings = _serving_s3(settings)
    serve(settings, args.host, args.port)
    return 0


def ui(args: argparse.Namespace) -> int:
    """``trainops ui``: the home's server's UI if it runs, else a server on loopback for it."""
    from trainops.client import running_server
    from trainops.server import serve

    settings = Settings.load()
    url = running_server(settings)
    if url is not None:
        print(
            f"Web UI: {url}/ (the home's server runs already: open the login link it printed, "
            f"or sign in with the API token in {settings.home / 'token'})",
            flush=True,
        )
        return 0
    serve(settings, "127.0.0.1", args.port)
    return 0


def _check_host(description: dict[str, Any], host: str) -> None:
    count = int(description.get("ResourceConfig", {}).get("InstanceCount") or 1)
    if host in {f"algo-{i}" for i in range(1, count + 1)}:
        return
    hosts = "algo-1" if count == 1 else f"algo-1 to algo-{count}"
    name = description.get("TrainingJobName")
    raise NoSuchThingError(f"job {name!r} has no host {host!r}; its hosts are {hosts}")


def _check_metric(description: dict[str, Any], metric: str) -> None:
    """A metric the job defines may simply have no points yet; any other name is a mistake."""
    algorithm = description.get("AlgorithmSpecification", {})
    defined = [str(m.get("Name")) for m in algorithm.get("MetricDefinitions") or []]
    if metric in defined:
        return
    name = description.get("TrainingJobName")
    known = f"its metrics are {', '.join(defined)}" if defined else "it defines no metrics"
    raise NoSuchThingError(f"job {name!r} has no metric named {metric!r}; {known}")


def print_line(line: dict[str, Any]) -> None:
    """A log line; the output is flushed once per page (``flush_output``), not per line."""
    print(format_log_line(line))


def print_lines(lines: list[dict[str, Any]]) -> None:
    """Log lines, written in one call (a page of 5,000 lines costs one write, not 10,000)."""
    sys.stdout.write("".join([f"{format_log_line(line)}\n" for line in lines]))


def flush_output() -> None:
    sys.stdout.flush()


def print_transition(transition: dict[str, Any]) -> None:
    print(format_transition(transition), flush=True)


def _skip(_line: dict[str, Any]) -> None:
    """``stop --wait`` shows transitions only, not the job's log."""
