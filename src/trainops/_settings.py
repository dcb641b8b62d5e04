"""Process-wide settings: each component's own settings, composed into one frozen :class:`Settings`.

Everything is read once, from the environment and an optional ``$TRAINOPS_HOME/config.yaml``,
so that every layer sees the same values and tests can build their own instance instead of
patching globals. This module only composes: each component declares and reads its own
settings (``S3Settings.read`` in ``trainops.storage._settings``, ``ControlSettings.read`` in
``trainops.control._settings``, …) through the one reader of ``trainops._settings_source``, and
:data:`SECTIONS` says which component fills which attribute. What is left here is the process's
own: its home, the server it talks to and its token, the region, which backend runs hosts and
the folders every machine shares. A config.yaml key that no component reads is refused.
docs/configuration.md lists every setting; docs/internals/settings.md says how to add one.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops._settings_source import SettingsSource
from trainops.actions._settings import ActionSettings
from trainops.agent._settings import AgentSettings
from trainops.archive import ArchiveLimits
from trainops.backends._settings import LocalCapacity, RaySettings
from trainops.catalog._settings import SpotPriceSettings
from trainops.control._settings import ControlSettings
from trainops.server._settings import ServerSettings
from trainops.storage._settings import MIB, S3Settings, TransferSettings

__all__ = [
    "MIB",
    "SECTIONS",
    "LocalCapacity",
    "RaySettings",
    "S3Settings",
    "Settings",
    "TransferSettings",
]

#: Each component's settings: the :class:`Settings` attribute and the component's reader.
SECTIONS: dict[str, Callable[[SettingsSource], object]] = {
    "s3": S3Settings.read,  # storage
    "transfer": TransferSettings.read,  # storage
    "capacity": LocalCapacity.read,  # backends (the local one)
    "ray": RaySettings.read,  # backends (Ray)
    "archive": ArchiveLimits.read,  # archive
    "control": ControlSettings.read,  # control plane
    "server": ServerSettings.read,  # HTTP server
    "actions": ActionSettings.read,  # rule actions
    "agent": AgentSettings.read,  # host agent (channels)
    "spot": SpotPriceSettings.read,  # catalog (the user's own spot prices)
}


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved settings for one process: its own, and each component's (see :data:`SECTIONS`)."""

    home: Path
    server_url: str | None = None
    token: str | None = field(default=None, repr=False)
    s3: S3Settings = field(default_factory=S3Settings)
    capacity: LocalCapacity = field(default_factory=LocalCapacity)
    transfer: TransferSettings = field(default_factory=TransferSettings)
    region: str = "us-east-1"
    archive: ArchiveLimits = field(default_factory=ArchiveLimits)
    # Where host agents run: a name in trainops.backends.BACKENDS ("local": processes here).
    backend: str = "local"
    # Folders every machine of a multi-machine backend sees at the same path (NFS, a cluster
    # file system): file:// URIs under them are allowed for jobs that span machines.
    shared_paths: tuple[str, ...] = ()
    # The Ray backend's cluster (``backend: ray``).
    ray: RaySettings = field(default_factory=RaySettings)
    control: ControlSettings = field(default_factory=ControlSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    actions: ActionSettings = field(default_factory=ActionSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    spot: SpotPriceSettings = field(default_factory=SpotPriceSettings)

    # Components' settings that are top-level keys of config.yaml, by their names there.
    @property
    def heartbeat_timeout(self) -> int:
        """``control.heartbeat_timeout``."""
        return self.control.heartbeat_timeout

    @property
    def keep_job_trees(self) -> int:
        """``control.keep_job_trees``."""
        return self.control.keep_job_trees

    @property
    def allowed_hosts(self) -> tuple[str, ...]:
        """``server.allowed_hosts``."""
        return self.server.allowed_hosts

    @property
    def webhook_networks(self) -> tuple[str, ...]:
        """``actions.webhook_networks``."""
        return self.actions.webhook_networks

    @property
    def fastfile_fallback(self) -> bool:
        """``agent.fastfile_fallback``."""
        return self.agent.fastfile_fallback

    @property
    def heartbeat_interval_ms(self) -> int:
        """``agent.heartbeat_interval_ms``."""
        return self.agent.heartbeat_interval_ms

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
        if self.s3.default_bucket:
            return f"s3://{self.s3.default_bucket}/jobs"
        # Not as_uri(): the file store reads a file:// URI's path as written, so a home in a
        # folder with a space would otherwise keep its objects under a literal "%20".
        return f"file://{self.objects_dir.resolve().as_posix()}/jobs"

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read settings from ``env`` (default ``os.environ``) and ``$TRAINOPS_HOME/config.yaml``."""
        env = os.environ if env is None else env
        home = Path(env.get("TRAINOPS_HOME") or Path.home() / ".trainops").expanduser()
        source = SettingsSource.open(env, home / "config.yaml")
        own = _own_settings(source)
        sections: dict[str, Any] = {name: read(source) for name, read in SECTIONS.items()}
        source.refuse_unknown()
        if sections["s3"].endpoint_url is None:
            sections["s3"] = _served_s3(home, sections["s3"])
        return cls(home=home, **own, **sections)


def _served_s3(home: Path, configured: S3Settings) -> S3Settings:
    """The S3 server a running ``trainops server --s3`` of this home advertises, if any."""
    if not (home / "s3" / "client.json").exists():  # (most commands: no module to import)
        return configured
    from trainops.storage._seaweed import read_client_file

    served = read_client_file(home)
    return configured if served is None else dataclasses.replace(served, serve=configured.serve)


def _own_settings(source: SettingsSource) -> dict[str, Any]:
    """The process's own settings (the keys no component owns)."""
    return {
        "server_url": source.text("server", "TRAINOPS_SERVER"),
        "token": source.text("token", "TRAINOPS_TOKEN"),
        "region": source.text("region", "TRAINOPS_REGION") or "us-east-1",
        "backend": source.text("backend", "TRAINOPS_BACKEND") or "local",
        "shared_paths": _shared_paths(source),
    }


def _shared_paths(source: SettingsSource) -> tuple[str, ...]:
    paths = source.names("shared_paths", "TRAINOPS_SHARED_PATHS", noun="folders") or ()
    relative = [p for p in paths if not Path(p).is_absolute()]
    if relative:
        shown = relative[0] if len(relative[0]) <= 80 else f"{relative[0][:80]}…"
        raise source.error(
            "shared_paths",
            "TRAINOPS_SHARED_PATHS",
            problem=f"shared_paths must be absolute folders, not {shown!r}",
        )
    return tuple(str(Path(p)) for p in paths)
