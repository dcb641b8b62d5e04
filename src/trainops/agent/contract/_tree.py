"""The host's /opt/ml-shaped tree: its paths, and the three config files the toolkit reads.

``TRAINOPS_AGENT_ROOT`` plays ``/opt/ml``; a spec path such as ``/opt/ml/x/y`` is re-rooted to
``<root>/x/y``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from trainops.protocol import DEFAULT_CHECKPOINT_PATH, ChannelSpec

__all__ = ["HostTree", "input_data_config", "resource_config"]

OPT_ML = PurePosixPath("/opt/ml")
GROUP_NAME = "homogeneousCluster"
NETWORK_INTERFACE = "lo"


@dataclass(frozen=True, slots=True)
class HostTree:
    """Every path of one host's tree, derived from its root."""

    root: Path
    checkpoint_path: str = DEFAULT_CHECKPOINT_PATH

    @property
    def input_dir(self) -> Path:
        return self.root / "input"

    @property
    def config_dir(self) -> Path:
        return self.input_dir / "config"

    @property
    def data_dir(self) -> Path:
        return self.input_dir / "data"

    @property
    def code_dir(self) -> Path:
        return self.root / "code"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def output_dir(self) -> Path:
        return self.root / "output"

    @property
    def output_data_dir(self) -> Path:
        return self.output_dir / "data"

    @property
    def intermediate_dir(self) -> Path:
        return self.output_dir / "intermediate"

    @property
    def failure_file(self) -> Path:
        return self.output_dir / "failure"

    @property
    def success_file(self) -> Path:
        return self.output_dir / "success"

    @property
    def checkpoint_dir(self) -> Path:
        return self.reroot(self.checkpoint_path)

    def channel_dir(self, name: str) -> Path:
        return self.data_dir / name

    def reroot(self, opt_ml_path: str) -> Path:
        """``/opt/ml/x/y`` -> ``<root>/x/y``."""
        relative = PurePosixPath(opt_ml_path).relative_to(OPT_ML)
        if ".." in relative.parts:
            raise ValueError(f"{opt_ml_path!r} leaves /opt/ml")
        return self.root.joinpath(*relative.parts)

    def create(self, channels: list[str]) -> None:
        dirs = [
            self.config_dir,
            self.code_dir,
            self.model_dir,
            self.output_data_dir,
            self.intermediate_dir,
            self.checkpoint_dir,
        ]
        # The tree holds the job's hyperparameters in clear: its owner's only (the script runs
        # as its owner); what lies below is unreachable to others through it.
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root.chmod(0o700)
        for path in dirs + [self.channel_dir(name) for name in channels]:
            path.mkdir(parents=True, exist_ok=True)
        self.config_dir.chmod(0o700)

    def write_config(self, name: str, content: dict[str, Any]) -> Path:
        """Write ``input/config/<name>`` atomically, readable by its owner only (0600)."""
        path = self.config_dir / name
        data = (json.dumps(content, indent=2, sort_keys=True) + "\n").encode("utf-8")
        temporary = path.with_name(f".{name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return path

    def read_config(self, name: str) -> dict[str, Any]:
        content: dict[str, Any] = json.loads((self.config_dir / name).read_text(encoding="utf-8"))
        return content


def resource_config(current_host: str, hosts: list[str], instance_type: str) -> dict[str, Any]:
    """``resourceconfig.json`` for a homogeneous cluster, hosts sorted as SageMaker sorts them."""
    ordered = sorted(hosts)
    return {
        "current_host": current_host,
        "hosts": ordered,
        "network_interface_name": NETWORK_INTERFACE,
        "current_instance_type": instance_type,
        "current_group_name": GROUP_NAME,
        "instance_groups": [
            {"instance_group_name": GROUP_NAME, "instance_type": instance_type, "hosts": ordered}
        ],
    }


def input_data_config(channels: tuple[ChannelSpec, ...]) -> dict[str, Any]:
    """``inputdataconfig.json``, as SageMaker writes it: one entry per channel.

    A file-system channel is always ``FullyReplicated`` (SageMaker forces it); ``CompressionType``
    and ``ShuffleConfig`` appear only when the channel sets them.
    """
    config: dict[str, Any] = {}
    for channel in channels:
        entry: dict[str, Any] = {}
        if channel.content_type:
            entry["ContentType"] = channel.content_type
        entry["TrainingInputMode"] = channel.mode
        entry["S3DistributionType"] = "ShardedByS3Key" if channel.sharded else "FullyReplicated"
        entry["RecordWrapperType"] = channel.record_wrapping
        if channel.compression != "None":
            entry["CompressionType"] = channel.compression
        if channel.shuffle_seed is not None:
            entry["ShuffleConfig"] = {"Seed": channel.shuffle_seed}
        config[channel.name] = entry
    return config
