"""Running the control plane: ``serve`` (long-running, blocking) and ``EmbeddedServer``.

Both build the store, backend and controller for one ``TRAINOPS_HOME``, recover what a previous
control plane left running, serve HTTP from uvicorn on a thread of its own, advertise their URL
in ``server.json`` (agents re-read it to find a restarted server) and, on exit, stop the
controller's threads but leave the agents running.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import signal
import socket
import sys
import threading
import time
from types import FrameType, TracebackType
from typing import TYPE_CHECKING

from trainops._errors import ServerError, TrainopsError
from trainops._home import home_token
from trainops._settings import Settings
from trainops._version import __version__
from trainops.backends import Backend, backend_for
from trainops.control import ControllerConfig, JobController
from trainops.report import ProfilerReportService as ProfilerReportService  # registers it
from trainops.rules import RulesService as RulesService  # registers the live rules service
from trainops.server._server_file import HomeLock, advertise, withdraw
from trainops.store import MetadataStore
from trainops.tuner import TunerHook as TunerHook  # registers the tuner service

if TYPE_CHECKING:
    from trainops.server._uvicorn import Uvicorn
    from trainops.server.ui import UiSite
    from trainops.storage._seaweed import S3Server

__all__ = ["EmbeddedServer", "serve", "ui_banner"]

_STARTUP_POLL_S = 0.005
_STARTUP_TIMEOUT_S = 30.0


class EmbeddedServer:
    """A control plane for the length of a ``with`` block, by default on an ephemeral port.

    ``url`` is known once the block is entered; agents of jobs still running at exit keep
    running, and a later server on the same ``TRAINOPS_HOME`` adopts them.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        backend: Backend | None = None,
        config: ControllerConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.settings = settings
        self.url = ""
        self.bind_url = ""
        self.token: str | None = None
        self._lock = HomeLock(settings)
        self._options = (backend, config, host, port)
        self._controller: JobController | None = None
        self._store: MetadataStore | None = None
        self._server: Uvicorn | None = None
        self._ui: UiSite | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.s3: S3Server | None = None

    @property
    def controller(self) -> JobController:
        if self._controller is None:
            raise RuntimeError("the server is not running")
        return self._controller

    def __enter__(self) -> EmbeddedServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        backend, config, host, port = self._options
        backend = backend or backend_for(self.settings)  # a wrong name fails before anything
        # The lock comes first: a second server of the home must not even open its database.
        self._lock.acquire()
        try:
            self.token = self.settings.token or home_token(self.settings.home, create=True)
            self._sock = _listen(host, port)
        except BaseException:
            self._lock.release()
            raise
        try:
            self._start_s3()
        except BaseException:
            self.stop()
            raise
        bound_port = self._sock.getsockname()[1]
        self.url, self.bind_url = _agent_url(host, bound_port), _url(host, bound_port)
        try:
            self._store = MetadataStore(self.settings.db_path)
            jobs = None if self.s3 is None else self.s3.jobs  # each job's own S3 key
            self._controller = JobController(
                self.settings, self._store, backend, config, credentials=jobs
            )
            # Recovery runs before HTTP is served; agents' requests queue on the listening socket.
            self._controller.start(self.url)
            # Advertised before HTTP is served (requests queue the same way): a client that sees
            # the server answer must find server.json, or it would not send the home's token.
            advertise(self.settings, self.url)
            self._serve_http()
        except BaseException:
            self.stop()
            raise

    def _start_s3(self) -> None:
        """With ``s3.serve``: start SeaweedFS, and jobs and clients use it (docs/storage.md)."""
        if not self.settings.s3.serve:
            return
        from trainops.server.aws import derive_credentials
        from trainops.storage._seaweed import DEFAULT_BUCKET, S3Server

        assert self.token is not None
        profile = derive_credentials(self.token)  # the AWS profile's key signs S3 requests too
        self.s3 = S3Server(
            self.settings.home,
            self.token,
            bucket=self.settings.s3.default_bucket or DEFAULT_BUCKET,
            region=self.settings.s3.region or self.settings.region,
            extra_keys=((profile.access_key_id, profile.secret_access_key),),
        )
        self.s3.start()
        served = dataclasses.replace(self.s3.settings, serve=True)
        self.settings = dataclasses.replace(self.settings, s3=served)

    def _serve_http(self) -> None:
        # Starlette and uvicorn are imported only now, after the backend has started its spare
        # agent: on a machine with more than one core, the agent's start-up overlaps theirs.
        import uvicorn

        from trainops.server._app import create_app
        from trainops.server._uvicorn import Uvicorn

        assert self._controller is not None and self._sock is not None
        guarded = dataclasses.replace(self.settings, token=self.token)
        app = create_app(self._controller, guarded, bind_host=self._options[2])
        self._ui = app.state.ui
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            ws="none",
            timeout_graceful_shutdown=2,
        )
        self._server = server = Uvicorn(config)
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [self._sock]}, name="trainops-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while not server.started:
            if not self._thread.is_alive():
                raise ServerError("the trainops server failed to start")
            if time.monotonic() > deadline:
                raise ServerError("the trainops server did not start within 30 s")
            time.sleep(_STARTUP_POLL_S)

    def ui_link(self) -> str:
        """The web UI's address: on a loopback server a new one-time login link (good once, for
        10 minutes), elsewhere the UI's root, where the API token signs in."""
        if self._ui is None:
            raise RuntimeError("the server is not running")
        if _is_loopback(self._options[2]):
            return self._ui.auth.login_link(self.url)
        return f"{self.bind_url}/"

    def stop(self) -> None:
        """Stop serving; agents keep running. Safe to call more than once."""
        if self.url:
            withdraw(self.settings, self.url)
        if self._controller is not None:
            self._controller.core.close_waiters()
        if self._server is not None:
            self._server.exit_now()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._controller is not None:
            self._controller.close()
        if self._store is not None:
            self._store.close()
        if self._sock is not None:
            self._sock.close()
        if self.s3 is not None:
            self.s3.stop()
            self.s3 = None
        self._lock.release()
        self._controller = self._store = self._server = self._thread = self._sock = None
        self._ui = None

    def __repr__(self) -> str:
        return f"EmbeddedServer(url={self.url!r}, home={str(self.settings.home)!r})"


def serve(
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 8470,
    *,
    backend: Backend | None = None,
    config: ControllerConfig | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM. A non-loopback ``host`` needs ``settings.token``."""
    if not _is_loopback(host) and not settings.token:
        raise TrainopsError(
            f"refusing to listen on {host}: a server reachable from other machines needs a "
            "token (set TRAINOPS_TOKEN or 'token:' in $TRAINOPS_HOME/config.yaml)"
        )
    from trainops.server._body import limit_malloc_arenas  # (imports Starlette: serving now)

    limit_malloc_arenas()  # a process that only serves: few heaps, so memory returns
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with EmbeddedServer(settings, backend=backend, config=config, host=host, port=port) as srv:
            print(_banner(srv), file=sys.stderr, flush=True)
            print(_aws_banner(srv), file=sys.stderr, flush=True)
            print(ui_banner(srv), file=sys.stderr, flush=True)
            while srv.running and not stop.wait(0.5):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # uvicorn sets TCP_NODELAY only on sockets it binds itself; without it every small response
    # waits out Nagle + delayed ACK (~40 ms). Linux copies the option to accepted connections.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)  # bursts of clients (hundreds of long-polls) must not overflow it
    except OSError as exc:
        sock.close()
        raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _banner(srv: EmbeddedServer) -> str:
    """What ``trainops server`` says: where it listens and, if different, where agents reach it."""
    where = srv.bind_url
    if srv.url != srv.bind_url:
        where += f" (all interfaces; local clients and agents use {srv.url})"
    token = (
        "the configured one (TRAINOPS_TOKEN or token: in config.yaml)"
        if srv.settings.token
        else f"in {srv.settings.home / 'token'}"
    )
    banner = (
        f"trainops {__version__} serving on {where} (home {srv.settings.home}; API token {token})"
    )
    if srv.s3 is not None:
        banner += (
            f"\nS3 (SeaweedFS) on {srv.s3.endpoint_url}, default bucket s3://{srv.s3.bucket}; "
            f"its key and secret are in {srv.settings.home / 's3' / 'client.json'}"
        )
    return banner


def ui_banner(srv: EmbeddedServer) -> str:
    """Where the web UI is: a one-time login link on loopback, else the page and the token."""
    link = srv.ui_link()
    if "/ui/login?code=" in link:
        return f"Web UI: {link} (a one-time login link, good for 10 minutes)"
    return f"Web UI: {link} (sign in with the API token)"


def _aws_banner(srv: EmbeddedServer) -> str:
    """Write the ``trainops`` AWS profile (the server's SigV4 key) and say how SDKs use it."""
    from trainops.server.aws import PROFILE, SDK_CONFIG, derive_credentials, write_profile

    assert srv.token is not None and srv.url is not None
    creds = derive_credentials(srv.token)
    directory = srv.settings.home / "aws"
    s3, bucket = (None, None) if srv.s3 is None else (srv.s3.endpoint_url, srv.s3.bucket)
    credentials = write_profile(
        directory,
        creds,
        region=srv.settings.region,
        endpoint=srv.url,
        s3_endpoint=s3,
        bucket=bucket,
    )
    return (
        f"SageMaker API on {srv.url}: access key id {creds.access_key_id}, secret in "
        f"{credentials} (profile {PROFILE!r}); for the AWS SDKs: "
        f"AWS_SHARED_CREDENTIALS_FILE={credentials} AWS_CONFIG_FILE={directory / 'config'} "
        f"AWS_PROFILE={PROFILE}; for the SageMaker Python SDK also "
        f"SAGEMAKER_USER_CONFIG_OVERRIDE={directory / SDK_CONFIG}"
    )


def _agent_url(host: str, port: int) -> str:
    """The URL local agents use: a wildcard bind is reached through loopback."""
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 (comparing, not binding)
        host = "127.0.0.1"
    return _url(host, port)


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
