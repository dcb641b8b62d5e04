"""Process-wide settings: where trainops keeps its state and how it reaches servers and storage.

Everything is read from the environment (and an optional ``$TRAINOPS_HOME/config.yaml``) once,
into a frozen :class:`Settings`, so that every layer sees the same values and tests can build
their own instance instead of patching globals.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops._errors import ConfigError
from trainops.archive import ArchiveLimits

__all__ = ["LocalCapacity", "RaySettings", "S3Settings", "Settings", "TransferSettings"]

MIB = 1 << 20
MIN_HEARTBEAT_TIMEOUT = 5


@dataclass(frozen=True, slots=True)
class S3Settings:
    """How ``s3://`` URIs are reached. Credentials stay here and never enter a job record."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)

    def client_env(self) -> dict[str, str]:
        """The AWS variables a child process (a host agent) needs to reach the same endpoint."""
        pairs = {
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
        }
        return {k: v for k, v in pairs.items() if v}


@dataclass(frozen=True, slots=True)
class TransferSettings:
    """How hard object transfers push: parallel requests, part size and the memory they may hold.

    ``concurrency`` is how many objects a many-object transfer moves at once;
    ``part_concurrency`` how many parts of one big object are in flight (multipart-upload parts
    or ranged-download slices); ``part_size`` the size of those parts; ``memory`` bounds the bytes
    a store buffers at once, over all its transfers together (parallelism is cut to fit).
    ``sync_part_concurrency`` is ``part_concurrency`` for the uploads a job's background sync
    makes while its script runs (checkpoints, intermediate output): one part at a time by
    default, so that the work an upload sets going competes least with the script (see
    docs/storage.md); the sync after the script ends uses ``part_concurrency``.
    """

    concurrency: int = 32
    part_concurrency: int = 4
    part_size: int = 16 * MIB
    memory: int = 256 * MIB
    sync_part_concurrency: int = 1

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"transfer concurrency must be at least 1, got {self.concurrency}")
        if self.part_concurrency < 1:
            raise ConfigError(
                f"transfer part concurrency must be at least 1, got {self.part_concurrency}"
            )
        if self.sync_part_concurrency < 1:
            raise ConfigError(
                "transfer sync part concurrency must be at least 1, got "
                f"{self.sync_part_concurrency}"
            )
        if self.part_size < 5 * MIB:
            raise ConfigError(f"transfer part size must be at least 5 MiB, got {self.part_size}")
        if self.memory < self.part_size:
            raise ConfigError(
                f"transfer memory ({self.memory} bytes) must hold at least one part "
                f"({self.part_size} bytes)"
            )

    def env(self) -> dict[str, str]:
        """The TRAINOPS_TRANSFER_* variables that give a child process these settings."""
        return {
            "TRAINOPS_TRANSFER_CONCURRENCY": str(self.concurrency),
            "TRAINOPS_TRANSFER_PART_CONCURRENCY": str(self.part_concurrency),
            "TRAINOPS_TRANSFER_PART_SIZE_MB": str(self.part_size // MIB),
            "TRAINOPS_TRANSFER_MEMORY_MB": str(self.memory // MIB),
            "TRAINOPS_TRANSFER_SYNC_PART_CONCURRENCY": str(self.sync_part_concurrency),
        }

    @property
    def part_slots(self) -> int:
        """How many parts fit in the memory bound at once (at least one)."""
        return max(1, self.memory // self.part_size)


@dataclass(frozen=True, slots=True)
class LocalCapacity:
    """What the local backend may hand out; ``None`` means "what the machine has"."""

    cpus: int | None = None
    memory_mb: int | None = None
    gpus: int | None = None


RAY_PLACEMENTS = ("strict_spread", "spread")
_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclass(frozen=True, slots=True)
class RaySettings:
    """How the Ray backend reaches its cluster and lays a job's hosts out on it.

    ``address`` is what ``ray.init`` takes (``auto``: the cluster this machine's ``ray start``
    joined; ``HOST:PORT``: its head). ``placement``: ``strict_spread`` puts every host of a job
    on a node of its own (a job that the cluster cannot spread waits, or fails if no set of its
    nodes ever could), ``spread`` prefers distinct nodes and shares them when it must.
    ``autoscaling``: the cluster grows on demand, so a job no node can hold now waits for the
    autoscaler instead of failing.
    """

    address: str | None = None
    namespace: str = "trainops"
    placement: str = "strict_spread"
    autoscaling: bool = False


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings for one process."""

    home: Path
    server_url: str | None = None
    token: str | None = field(default=None, repr=False)
    s3: S3Settings = S3Settings()
    capacity: LocalCapacity = LocalCapacity()
    transfer: TransferSettings = TransferSettings()
    region: str = "us-east-1"
    archive: ArchiveLimits = field(default_factory=ArchiveLimits)
    # Host trees (jobs/<job>/) of ended jobs beyond the newest this many are deleted.
    keep_job_trees: int = 20
    # Where host agents run: a name in trainops.backends.BACKENDS ("local": processes here).
    backend: str = "local"
    # Folders every machine of a multi-machine backend sees at the same path (NFS, a cluster
    # file system): file:// URIs under them are allowed for jobs that span machines.
    shared_paths: tuple[str, ...] = ()
    # A host whose agent sent no report (agents report at least every 0.5 s) for this many
    # seconds is lost, even where the backend still sees its agent.
    heartbeat_timeout: int = 60
    # The Ray backend's cluster (``backend: ray``).
    ray: RaySettings = RaySettings()

    # A FastFile channel on a machine without FUSE (or rclone) is downloaded as in File mode,
    # with a warning in the job's log, instead of failing the job.
    fastfile_fallback: bool = False
    # Extra Host names the server answers to (beyond loopback and its bind address); "*": any.
    allowed_hosts: tuple[str, ...] = ()
    # Networks a rule's webhook may reach besides public addresses: "loopback", "link-local",
    # "private" or a network ("10.1.0.0/16"). None by default (trainops.actions._destinations).
    webhook_networks: tuple[str, ...] = ()

    @property
    def db_path(self) -> Path:
        return self.home / "trainops.db"

    @property
    def objects_dir(self) -> Path:
        return self.home / "objects"

    @property
    def jobs_dir(self) -> Path:
        return self.home / "jobs"

    @property
    def server_file(self) -> Path:
        """Where a running server advertises its URL, so agents can find a restarted one."""
        return self.home / "server.json"

    @property
    def default_output_uri(self) -> str:
        # Not as_uri(): the file store reads a file:// URI's path as written, so a home in a
        # folder with a space would otherwise keep its objects under a literal "%20".
        return f"file://{self.objects_dir.resolve().as_posix()}/jobs"

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read settings from ``env`` (default ``os.environ``) and ``$TRAINOPS_HOME/config.yaml``."""
        env = os.environ if env is None else env
        home = Path(env.get("TRAINOPS_HOME") or Path.home() / ".trainops").expanduser()
        file_cfg = _read_config_file(home / "config.yaml")
        s3_cfg = _section(file_cfg, "s3", home)
        cap_cfg = _section(file_cfg, "local", home)
        s3 = S3Settings(
            endpoint_url=env.get("AWS_ENDPOINT_URL_S3")
            or env.get("AWS_ENDPOINT_URL")
            or _opt_str(s3_cfg, "endpoint_url"),
            region=env.get("AWS_DEFAULT_REGION")
            or env.get("AWS_REGION")
            or _opt_str(s3_cfg, "region"),
            access_key_id=env.get("AWS_ACCESS_KEY_ID") or _opt_str(s3_cfg, "access_key_id"),
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY")
            or _opt_str(s3_cfg, "secret_access_key"),
        )
        capacity = LocalCapacity(
            cpus=_opt_int(env, "TRAINOPS_LOCAL_CPUS", cap_cfg, "cpus"),
            memory_mb=_opt_int(env, "TRAINOPS_LOCAL_MEMORY_MB", cap_cfg, "memory_mb"),
            gpus=_opt_int(env, "TRAINOPS_LOCAL_GPUS", cap_cfg, "gpus"),
        )
        transfer = _transfer_settings(env, _section(file_cfg, "transfer", home))
        return cls(
            home=home,
            server_url=env.get("TRAINOPS_SERVER") or _opt_str(file_cfg, "server"),
            token=env.get("TRAINOPS_TOKEN") or _opt_str(file_cfg, "token"),
            s3=s3,
            capacity=capacity,
            transfer=transfer,
            region=env.get("TRAINOPS_REGION") or _opt_str(file_cfg, "region") or "us-east-1",
            archive=_archive_limits(env, _section(file_cfg, "archive", home)),
            keep_job_trees=_setting(env, "TRAINOPS_KEEP_JOB_TREES", file_cfg, "keep_job_trees", 20),
            fastfile_fallback=_setting(
                env, "TRAINOPS_FASTFILE_FALLBACK", file_cfg, "fastfile_fallback", 0
            )
            != 0,
            heartbeat_timeout=_heartbeat_timeout(env, file_cfg),
            backend=env.get("TRAINOPS_BACKEND") or _opt_str(file_cfg, "backend") or "local",
            shared_paths=_shared_paths(env, file_cfg, home),
            allowed_hosts=_allowed_hosts(env, file_cfg, home),
            webhook_networks=_webhook_networks(env, file_cfg, home),
            ray=_ray_settings(env, _section(file_cfg, "ray", home), home),
        )


def _ray_settings(env: Mapping[str, str], cfg: Mapping[str, Any], home: Path) -> RaySettings:
    placement = env.get("TRAINOPS_RAY_PLACEMENT") or _opt_str(cfg, "placement") or "strict_spread"
    if placement not in RAY_PLACEMENTS:
        raise ConfigError(
            f"{home / 'config.yaml'}: ray.placement must be one of {', '.join(RAY_PLACEMENTS)}, "
            f"not {placement!r}"
        )
    autoscaling = env.get("TRAINOPS_RAY_AUTOSCALING")
    scaling: object = cfg.get("autoscaling", False) if autoscaling is None else autoscaling
    if isinstance(scaling, str):
        word = scaling.strip().lower()
        scaling = True if word in _YES else False if word in _NO else scaling
    if not isinstance(scaling, bool):
        raise ConfigError(
            f"ray.autoscaling ({home / 'config.yaml'} or TRAINOPS_RAY_AUTOSCALING) must be "
            f"true or false, not {scaling!r}"
        )
    return RaySettings(
        address=env.get("TRAINOPS_RAY_ADDRESS") or _opt_str(cfg, "address"),
        namespace=env.get("TRAINOPS_RAY_NAMESPACE") or _opt_str(cfg, "namespace") or "trainops",
        placement=placement,
        autoscaling=scaling,
    )


def _shared_paths(env: Mapping[str, str], cfg: Mapping[str, Any], home: Path) -> tuple[str, ...]:
    raw = env.get("TRAINOPS_SHARED_PATHS")
    value: object = raw.split(",") if raw is not None else cfg.get("shared_paths") or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ConfigError(f"{home / 'config.yaml'}: 'shared_paths' must be a list of folders")
    paths = [p.strip() for p in value if p.strip()]
    relative = [p for p in paths if not Path(p).is_absolute()]
    if relative:
        raise ConfigError(f"shared_paths must be absolute folders, not {relative[0]!r}")
    return tuple(str(Path(p)) for p in paths)


def _heartbeat_timeout(env: Mapping[str, str], cfg: Mapping[str, Any]) -> int:
    value = _setting(env, "TRAINOPS_HEARTBEAT_TIMEOUT", cfg, "heartbeat_timeout", 60)
    if value < MIN_HEARTBEAT_TIMEOUT:
        raise ConfigError(
            f"heartbeat_timeout must be at least {MIN_HEARTBEAT_TIMEOUT} seconds (an agent "
            f"retries a failed report within 2 s), got {value}"
        )
    return value


def _transfer_settings(env: Mapping[str, str], cfg: Mapping[str, Any]) -> TransferSettings:
    defaults = TransferSettings()
    concurrency = _opt_int(env, "TRAINOPS_TRANSFER_CONCURRENCY", cfg, "concurrency", "transfer")
    parts = _opt_int(env, "TRAINOPS_TRANSFER_PART_CONCURRENCY", cfg, "part_concurrency", "transfer")
    part_mb = _opt_int(env, "TRAINOPS_TRANSFER_PART_SIZE_MB", cfg, "part_size_mb", "transfer")
    memory_mb = _opt_int(env, "TRAINOPS_TRANSFER_MEMORY_MB", cfg, "memory_mb", "transfer")
    sync_parts = _opt_int(
        env, "TRAINOPS_TRANSFER_SYNC_PART_CONCURRENCY", cfg, "sync_part_concurrency", "transfer"
    )
    return TransferSettings(
        concurrency=defaults.concurrency if concurrency is None else concurrency,
        part_concurrency=defaults.part_concurrency if parts is None else parts,
        part_size=defaults.part_size if part_mb is None else part_mb * MIB,
        memory=defaults.memory if memory_mb is None else memory_mb * MIB,
        sync_part_concurrency=defaults.sync_part_concurrency if sync_parts is None else sync_parts,
    )


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    import yaml  # only when there is a config file: most commands run without one

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def _section(cfg: dict[str, Any], name: str, home: Path) -> dict[str, Any]:
    value = cfg.get(name) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{home / 'config.yaml'}: '{name}' must be a mapping")
    return value


def _opt_str(cfg: Mapping[str, Any], key: str) -> str | None:
    value = cfg.get(key)
    return None if value is None else str(value)


def _allowed_hosts(env: Mapping[str, str], cfg: Mapping[str, Any], home: Path) -> tuple[str, ...]:
    raw = env.get("TRAINOPS_ALLOWED_HOSTS")
    if raw is not None:
        return tuple(h.strip() for h in raw.split(",") if h.strip())
    value = cfg.get("allowed_hosts") or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
        raise ConfigError(f"{home / 'config.yaml'}: 'allowed_hosts' must be a list of host names")
    return tuple(value)


def _webhook_networks(
    env: Mapping[str, str], cfg: Mapping[str, Any], home: Path
) -> tuple[str, ...]:
    raw = env.get("TRAINOPS_WEBHOOK_NETWORKS")
    where = "TRAINOPS_WEBHOOK_NETWORKS" if raw is not None else f"{home / 'config.yaml'}"
    value: object = raw.split(",") if raw is not None else cfg.get("webhook_networks") or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ConfigError(f"{where}: 'webhook_networks' must be a list of networks")
    names = tuple(n.strip() for n in value if n.strip())
    for name in names:
        if name.lower() in ("loopback", "link-local", "private"):
            continue
        try:
            ipaddress.ip_network(name, strict=False)
        except ValueError:
            raise ConfigError(
                f"{where}: webhook_networks entry {name[:80]!r} is not a network "
                "(10.1.0.0/16, fd00::/8) nor one of loopback, link-local, private"
            ) from None
    return names


def _opt_int(
    env: Mapping[str, str], var: str, cfg: Mapping[str, Any], key: str, section: str = "local"
) -> int | None:
    raw = env.get(var)
    source = f"environment variable {var}"
    if raw is None:
        raw, source = cfg.get(key), f"config.yaml {section + '.' if section else ''}{key}"
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: expected a whole number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{source}: must not be negative, got {value}")
    return value


_ARCHIVE_VARIABLES = {
    "max_members": "TRAINOPS_ARCHIVE_MAX_MEMBERS",
    "max_total_bytes": "TRAINOPS_ARCHIVE_MAX_TOTAL_BYTES",
    "max_member_bytes": "TRAINOPS_ARCHIVE_MAX_MEMBER_BYTES",
    "max_ratio": "TRAINOPS_ARCHIVE_MAX_RATIO",
    "ratio_floor_bytes": "TRAINOPS_ARCHIVE_RATIO_FLOOR_BYTES",
    "max_path_length": "TRAINOPS_ARCHIVE_MAX_PATH_LENGTH",
}


def _archive_limits(env: Mapping[str, str], cfg: Mapping[str, Any]) -> ArchiveLimits:
    """``archive:`` in config.yaml and ``TRAINOPS_ARCHIVE_*`` (which win); defaults otherwise."""
    unknown = sorted(set(cfg) - set(_ARCHIVE_VARIABLES))
    if unknown:
        raise ConfigError(
            f"config.yaml archive: unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(_ARCHIVE_VARIABLES)}"
        )
    defaults = ArchiveLimits()
    values = {
        key: _setting(env, var, cfg, key, getattr(defaults, key), section="archive.")
        for key, var in _ARCHIVE_VARIABLES.items()
    }
    return ArchiveLimits(**values)


def _setting(
    env: Mapping[str, str],
    var: str,
    cfg: Mapping[str, Any],
    key: str,
    default: int,
    section: str = "",
) -> int:
    """A whole number from ``var`` (when set and not empty) or config.yaml ``<section><key>``,
    else ``default``."""
    given = {var: env[var]} if env.get(var) else {}
    found = _opt_int(given, var, cfg, key, section.rstrip("."))
    return default if found is None else found
