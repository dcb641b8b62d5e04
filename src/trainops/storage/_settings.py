"""The storage layer's settings: how ``s3://`` is reached, and how hard transfers push.

``s3:`` in config.yaml (or the usual ``AWS_*`` variables) and ``transfer:`` (or
``TRAINOPS_TRANSFER_*``); docs/configuration.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainops._errors import ConfigError
from trainops._settings_source import SettingsSource

__all__ = ["MIB", "S3Settings", "TransferSettings"]

MIB = 1 << 20
MIN_PART_MB = 5  # S3's smallest multipart part


@dataclass(frozen=True, slots=True)
class S3Settings:
    """How ``s3://`` URIs are reached. Credentials stay here and never enter a job record."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    # The bucket of jobs' default output (s3://<bucket>/jobs); unset: the home's objects/.
    default_bucket: str | None = None
    # ``trainops server`` starts and supervises its own S3 server (SeaweedFS) when true.
    serve: bool = False

    @classmethod
    def read(cls, source: SettingsSource) -> S3Settings:
        """``s3:`` in config.yaml; the AWS (and TRAINOPS_S3_*) variables win."""
        s3 = source.within("s3")
        endpoint = s3.text("endpoint_url", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
        serve = bool(s3.flag("serve", "TRAINOPS_S3_SERVE"))
        if serve and endpoint:
            raise s3.error(
                "serve",
                "TRAINOPS_S3_SERVE",
                problem="s3.serve starts trainops' own S3 server, but an S3 endpoint is named "
                f"too ({endpoint[:80]}): keep one of them",
            )
        return cls(
            endpoint_url=endpoint,
            region=s3.text("region", "AWS_DEFAULT_REGION", "AWS_REGION"),
            access_key_id=s3.text("access_key_id", "AWS_ACCESS_KEY_ID"),
            secret_access_key=s3.text("secret_access_key", "AWS_SECRET_ACCESS_KEY"),
            default_bucket=s3.text("default_bucket", "TRAINOPS_S3_DEFAULT_BUCKET"),
            serve=serve,
        )

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
        if self.part_size < MIN_PART_MB * MIB:
            raise ConfigError(f"transfer part size must be at least 5 MiB, got {self.part_size}")
        if self.memory < self.part_size:
            raise ConfigError(
                f"transfer memory ({self.memory} bytes) must hold at least one part "
                f"({self.part_size} bytes)"
            )

    @classmethod
    def read(cls, source: SettingsSource) -> TransferSettings:
        """``transfer:`` in config.yaml; the ``TRAINOPS_TRANSFER_*`` variables win."""
        t = source.within("transfer")
        default = cls()
        concurrency = t.whole_number(
            "concurrency", "TRAINOPS_TRANSFER_CONCURRENCY", minimum=1, label="transfer concurrency"
        )
        parts = t.whole_number(
            "part_concurrency",
            "TRAINOPS_TRANSFER_PART_CONCURRENCY",
            minimum=1,
            label="transfer part concurrency",
        )
        sync_parts = t.whole_number(
            "sync_part_concurrency",
            "TRAINOPS_TRANSFER_SYNC_PART_CONCURRENCY",
            minimum=1,
            label="transfer sync part concurrency",
        )
        part_mb = t.whole_number(
            "part_size_mb",
            "TRAINOPS_TRANSFER_PART_SIZE_MB",
            minimum=MIN_PART_MB,
            label="transfer part size",
            unit=" MiB",
        )
        memory_mb = t.whole_number("memory_mb", "TRAINOPS_TRANSFER_MEMORY_MB", label="memory")
        part_size = default.part_size if part_mb is None else part_mb * MIB
        memory = default.memory if memory_mb is None else memory_mb * MIB
        if memory < part_size:
            raise t.error(
                "memory_mb",
                "TRAINOPS_TRANSFER_MEMORY_MB",
                problem=f"transfer memory ({memory // MIB} MiB) must hold at least one part "
                f"({part_size // MIB} MiB): raise memory_mb or lower part_size_mb",
            )
        return cls(
            concurrency=default.concurrency if concurrency is None else concurrency,
            part_concurrency=default.part_concurrency if parts is None else parts,
            part_size=part_size,
            memory=memory,
            sync_part_concurrency=default.sync_part_concurrency
            if sync_parts is None
            else sync_parts,
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
