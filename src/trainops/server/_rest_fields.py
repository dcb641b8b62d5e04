"""How a job's spec fields are shown in the REST describe: the ``to_rest`` conversions that
``_schema.MEMBERS`` name, each from the submitted job's value (``SubmittedJob``) and what
showing needs (:class:`Shown`: the job's masker, the server's default output).

A conversion gives :data:`OMIT` where the REST describe leaves the key out (a container command
a job does not have, a limit it did not set).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from trainops.protocol import ChannelSpec, MetricSpec
from trainops.server._redaction import Masker, hyperparameter_text, mask_text

__all__ = [
    "OMIT",
    "Shown",
    "as_is",
    "channels",
    "compression_type",
    "hyperparameters",
    "masked_mapping",
    "masked_uri",
    "metric_definitions",
    "omitted_if_empty",
    "omitted_if_none",
    "output_path",
    "uncompressed",
]


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


#: What a conversion gives for a key the REST describe leaves out.
OMIT: Final = _Omit()


@dataclass(frozen=True, slots=True)
class Shown:
    """What showing a job's fields needs: its masker (its secrets) and the server's default
    output (where a job that names none writes; asked only then: finding it touches the disk)."""

    mask: Masker
    default_output: Callable[[], str]


def as_is(value: Any, shown: Shown) -> Any:
    return value


def omitted_if_none(value: Any, shown: Shown) -> Any:
    return OMIT if value is None else value


def omitted_if_empty(value: Sequence[Any] | None, shown: Shown) -> Any:
    return OMIT if not value else list(value)


def hyperparameters(value: Mapping[str, Any], shown: Shown) -> dict[str, str]:
    """As text (JSON for a structure), the secrets masked."""
    return shown.mask.mapping({k: hyperparameter_text(v) for k, v in value.items()})


def masked_mapping(value: Mapping[str, str], shown: Shown) -> dict[str, str]:
    return shown.mask.mapping(dict(value))


def masked_uri(value: str | None, shown: Shown) -> str | None:
    """A URI with any credentials in it masked."""
    return None if value is None else mask_text(value)


def output_path(value: str | None, shown: Shown) -> str:
    """Where the job writes: its own output path, else the server's default."""
    return mask_text(value or shown.default_output())


def uncompressed(value: str) -> bool:
    """``OutputDataConfig.CompressionType`` as the spec's ``disable_output_compression``."""
    return value == "NONE"


def compression_type(value: bool, shown: Shown) -> str:
    """The spec's ``disable_output_compression`` as ``OutputDataConfig.CompressionType``."""
    return "NONE" if value else "GZIP"


def metric_definitions(value: Sequence[MetricSpec], shown: Shown) -> list[Any]:
    return [{"Name": m.name, "Regex": m.regex} for m in value]


def channels(value: Sequence[ChannelSpec], shown: Shown) -> list[dict[str, Any]]:
    return [_channel(channel) for channel in value]


def _channel(channel: ChannelSpec) -> dict[str, Any]:
    found: dict[str, Any] = {
        "ChannelName": channel.name,
        "Uri": None if channel.uri is None else mask_text(channel.uri),
        "ContentType": channel.content_type,
        "Distribution": channel.distribution,
        "ShuffleSeed": channel.shuffle_seed,
        "InputMode": channel.mode,
        "CompressionType": channel.compression,
        "RecordWrapperType": channel.record_wrapping,
        "S3DataType": channel.s3_data_type,
    }
    if channel.attribute_names:
        found["AttributeNames"] = list(channel.attribute_names)
    fs = channel.file_system
    if fs is not None:
        found["FileSystem"] = {
            "DirectoryPath": fs.directory_path,
            "FileSystemAccessMode": fs.access_mode,
            "FileSystemType": fs.type,
            "FileSystemId": fs.id,
        }
    return found
