"""A FastFile channel's lazy view of an ``s3://`` prefix: an rclone FUSE mount that dies with it.

rclone (Debian's package, mounting through ``fusermount3``) runs in a private mount namespace of
its own, started as ``python -m trainops._hostns_exec --die-with-parent <agent pid> -- rclone
mount …``: the mount exists only in that namespace, never in the machine's mount table, and the
job's processes graft it into their own namespaces (a :class:`Bind` with a ``namespace``). When
rclone ends, closed by the agent or killed with it (the kernel's parent-death signal), its
namespace and the mount end too: a killed agent leaves nothing mounted to clean up.

The endpoint and credentials reach rclone as ``RCLONE_CONFIG_TRAINOPS_*`` variables, never on
its command line (which ``ps`` shows) nor in a log; its environment is otherwise minimal (none
of the agent's own ``AWS_*``). The flags are in :data:`MOUNT_FLAGS` (why each: there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from trainops._errors import StorageError
from trainops._settings import S3Settings
from trainops.agent.supervision._hostns import namespaces_available

__all__ = ["MOUNT_FLAGS", "REMOTE", "RcloneMount", "fuse_problem", "rclone_env"]

REMOTE = "TRAINOPS"
MOUNT_FLAGS = (
    "--read-only",
    "--vfs-cache-mode=off",  # no disk cache: each open file is one stream from storage ...
    "--buffer-size=16M",  # ... read ahead in memory, up to this much per open file
    "--vfs-read-chunk-size=32M",  # the first ranged GET of a file; doubles as it is read on
    "--max-read-ahead=1M",  # the kernel's read-ahead for the FUSE device (default 128 KiB)
    "--no-modtime",  # sizes and times come from the listing: no HEAD request per file
    "--no-checksum",
    "--dir-cache-time=1000h",  # the channel is read-only for the job: listings stay valid
    "--attr-timeout=1h",
    "--poll-interval=0",
    "--log-level=NOTICE",
)
_LIVE_SECONDS = 60.0  # rclone start-up and the FUSE mount
_STOP_SECONDS = 10.0
# PYTHONPATH: the wrapper that starts rclone is trainops' own module
_PASSED_THROUGH = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "SSL_CERT_FILE", "SSL_CERT_DIR", "TZ")
_AWS_AUTH = (
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_SESSION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
)


def fuse_problem() -> str | None:
    """Why an ``s3://`` FastFile view cannot be mounted here, or None when it can."""
    if shutil.which("rclone") is None:
        return "rclone is not installed (on Debian: apt-get install rclone fuse3)"
    if shutil.which("fusermount3") is None and shutil.which("fusermount") is None:
        return "fusermount3 is not installed (on Debian: apt-get install fuse3)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (FUSE is not available on this machine)"
    if os.geteuid() != 0 or not namespaces_available():
        return "the agent cannot make a private mount namespace for the mount (it needs root)"
    return None


def rclone_env(s3: S3Settings, home: Path, environ: dict[str, str]) -> dict[str, str]:
    """rclone's whole environment: the remote ``TRAINOPS`` from ``s3``, and little else."""
    env = {name: environ[name] for name in _PASSED_THROUGH if name in environ}
    env["HOME"] = str(home)
    env["RCLONE_CONFIG"] = str(home / "rclone.conf")  # empty: the remote is in the environment
    prefix = f"RCLONE_CONFIG_{REMOTE}_"
    config = {"TYPE": "s3", "PROVIDER": "Other" if s3.endpoint_url else "AWS"}
    config["REGION"] = s3.region or "us-east-1"
    if s3.endpoint_url:
        config |= {"ENDPOINT": s3.endpoint_url, "FORCE_PATH_STYLE": "true"}
    if s3.access_key_id and s3.secret_access_key:
        config |= {"ACCESS_KEY_ID": s3.access_key_id, "SECRET_ACCESS_KEY": s3.secret_access_key}
    else:  # the usual AWS chain: a profile, a web identity, the instance's role
        config["ENV_AUTH"] = "true"
        env |= {name: environ[name] for name in _AWS_AUTH if name in environ}
    return env | {prefix + key: value for key, value in config.items()}


def remote_path(uri: str) -> str:
    """``s3://bucket/some/prefix/`` as rclone names it: ``TRAINOPS:bucket/some/prefix``."""
    return f"{REMOTE}:{uri.removeprefix('s3://').strip('/')}"


class RcloneMount:
    """``root`` (an ``s3://`` prefix) mounted read-only at ``mount_point`` in rclone's own
    namespace, showing only the keys in ``files_from`` when it is given."""

    def __init__(
        self,
        root: str,
        mount_point: Path,
        *,
        s3: S3Settings,
        state_dir: Path,
        files_from: Path | None = None,
    ) -> None:
        self.root = root
        self.mount_point = mount_point
        self._s3 = s3
        self._state_dir = state_dir
        self._files_from = files_from
        self._process: subprocess.Popen[bytes] | None = None
        self._closing = False

    @property
    def log_file(self) -> Path:
        return self._state_dir / "rclone.log"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def namespace(self) -> Path:
        """The mount namespace the mount lives in (rclone's)."""
        assert self._process is not None
        return Path(f"/proc/{self._process.pid}/ns/mnt")

    def argv(self) -> list[str]:
        """The command: rclone in a namespace of its own that ends with the agent."""
        flags = [*MOUNT_FLAGS, f"--cache-dir={self._state_dir / 'cache'}"]
        flags.append(f"--log-file={self.log_file}")
        if self._files_from is not None:
            flags.append(f"--files-from-raw={self._files_from}")
        wrapper = [sys.executable, "-m", "trainops._hostns_exec"]
        wrapper += ["--die-with-parent", str(os.getpid()), "--"]
        return [*wrapper, "rclone", "mount", remote_path(self.root), str(self.mount_point), *flags]

    def start(self, stopping: Callable[[], bool]) -> None:
        """Start rclone and return once its mount is live (or raise, rclone stopped)."""
        self._state_dir.mkdir(parents=True, exist_ok=True)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        (self._state_dir / "rclone.conf").touch()
        env = rclone_env(self._s3, self._state_dir, dict(os.environ))
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(  # an argv list, never a shell
                self.argv(),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,  # a Ctrl-C at the terminal is the agent's to handle
            )
        self._wait_live(stopping)

    def _wait_live(self, stopping: Callable[[], bool]) -> None:
        assert self._process is not None
        deadline = time.monotonic() + _LIVE_SECONDS
        delay = 0.005
        while not self._mounted():
            if self._process.poll() is not None:
                raise StorageError(f"rclone mount ended (exit {self._process.returncode})")
            if stopping() or time.monotonic() > deadline:
                what = "the job is stopping" if stopping() else f"not live in {_LIVE_SECONDS:g} s"
                raise StorageError(f"rclone mount: {what}")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _mounted(self) -> bool:
        """Whether rclone's namespace has the FUSE mount at the mount point."""
        assert self._process is not None
        wanted = _escaped(str(self.mount_point))
        try:
            table = Path(f"/proc/{self._process.pid}/mountinfo").read_text(encoding="utf-8")
        except OSError:
            return False
        return any(
            _mount_point_of(line) == wanted and "fuse" in line for line in table.splitlines()
        )

    def failure(self) -> str | None:
        """Why rclone is no longer serving the view, if it ended on its own."""
        if self._process is None or self._closing or self._process.poll() is None:
            return None
        return f"rclone ended (exit {self._process.returncode}) while the script ran"

    def log_tail(self, lines: int = 5) -> str:
        with contextlib.suppress(OSError):
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
            return " | ".join(text.strip().splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        """End rclone (SIGTERM: it unmounts and exits; SIGKILL after a while): the mount and
        its namespace go with it."""
        self._closing = True
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _mount_point_of(line: str) -> str:
    fields = line.split(" ")
    return fields[4] if len(fields) > 4 else ""


def _escaped(path: str) -> str:
    """A path as /proc/*/mountinfo writes it (space, tab, newline, backslash octal-escaped)."""
    for char in "\\ \t\n":
        path = path.replace(char, f"\\{ord(char):03o}")
    return path
