"""Process-wide settings: where trainops keeps its state and how it reaches servers and storage.

Everything is read from the environment (and an optional ``$TRAINOPS_HOME/config.yaml``) once,
into a frozen :class:`Settings`, so that every layer sees the same values and tests can build
their own instance instead of patching globals.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainops._errors import ConfigError

__all__ = ["LocalCapacity", "S3Settings", "Settings"]


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
class LocalCapacity:
    """What the local backend may hand out; ``None`` means "what the machine has"."""

    cpus: int | None = None
    memory_mb: int | None = None
    gpus: int | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings for one process."""

    home: Path
    server_url: str | None = None
    token: str | None = field(default=None, repr=False)
    s3: S3Settings = S3Settings()
    capacity: LocalCapacity = LocalCapacity()
    region: str = "us-east-1"

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
        return self.objects_dir.resolve().as_uri() + "/jobs"

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
        return cls(
            home=home,
            server_url=env.get("TRAINOPS_SERVER") or _opt_str(file_cfg, "server"),
            token=env.get("TRAINOPS_TOKEN") or _opt_str(file_cfg, "token"),
            s3=s3,
            capacity=capacity,
            region=env.get("TRAINOPS_REGION") or _opt_str(file_cfg, "region") or "us-east-1",
        )


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
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


def _opt_int(env: Mapping[str, str], var: str, cfg: Mapping[str, Any], key: str) -> int | None:
    raw = env.get(var)
    source = f"environment variable {var}"
    if raw is None:
        raw, source = cfg.get(key), f"config.yaml local.{key}"
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: expected a whole number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{source}: must not be negative, got {value}")
    return value
