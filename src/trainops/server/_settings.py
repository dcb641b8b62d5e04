"""The HTTP server's settings: the Host names it answers to besides loopback and its address,
and which local Python runs each container image named by the SageMaker API.

``allowed_hosts`` in config.yaml (a list) or ``TRAINOPS_ALLOWED_HOSTS`` (comma-separated);
``*`` allows any (docs/api.md). ``images`` (a list) or ``TRAINOPS_IMAGES`` (comma-separated):
entries ``IMAGE=PYTHON``, where ``IMAGE`` is a SageMaker framework (``pytorch``, ``pytorch:2.3``)
or an exact image URI, and ``PYTHON`` is ``server`` (the server's own Python) or an absolute
path to an interpreter (docs/sagemaker-api.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainops._settings_source import SettingsSource

__all__ = ["FRAMEWORKS", "SERVER_PYTHON", "ImageMapping", "ServerSettings"]

#: The SageMaker framework training images, by the name an ``images`` entry gives them, with
#: their ECR repository names.
FRAMEWORKS = {
    "pytorch": "pytorch-training",
    "tensorflow": "tensorflow-training",
    "mxnet": "mxnet-training",
    "huggingface-pytorch": "huggingface-pytorch-training",
    "huggingface-tensorflow": "huggingface-tensorflow-training",
    "sklearn": "sagemaker-scikit-learn",
    "xgboost": "sagemaker-xgboost",
}
SERVER_PYTHON = "server"
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_URI = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,254}")
_PATH = re.compile(r"/[^\x00-\x1f\x7f]{0,4095}")


@dataclass(frozen=True, slots=True)
class ImageMapping:
    """One ``images`` entry: the images it matches and the Python that runs them."""

    framework: str | None
    """A key of :data:`FRAMEWORKS`; None for an exact URI."""
    version: str | None
    """The framework version it matches (``2.3`` matches 2.3 and 2.3.x); None: any."""
    uri: str | None
    """An exact image URI; None for a framework entry."""
    python: str
    """``server`` (the server's own interpreter) or an absolute interpreter path."""

    @classmethod
    def parse(cls, entry: str) -> ImageMapping:
        """``IMAGE=PYTHON``; raises ValueError with the problem's words."""
        image, sep, python = (part.strip() for part in entry.partition("="))
        if not sep or not image or not python:
            raise ValueError("is not IMAGE=PYTHON (e.g. pytorch:2.3=server)")
        if python != SERVER_PYTHON and not _PATH.fullmatch(python):
            raise ValueError(f"names {python[:60]!r}: use server or an absolute interpreter path")
        framework, tagged, version = image.partition(":")
        if "/" in image or (tagged and framework not in FRAMEWORKS):  # an exact URI
            if not _URI.fullmatch(image):
                raise ValueError("has an image URI with characters an image name cannot have")
            return cls(None, None, image, python)
        if framework not in FRAMEWORKS:
            raise ValueError(
                f"names no framework: use one of {', '.join(FRAMEWORKS)} (with :VERSION or "
                "not), or an exact image URI with its tag"
            )
        if version and not _VERSION.fullmatch(version):
            raise ValueError(f"has version {version[:20]!r}: use digits and dots (2.3)")
        return cls(framework, version or None, None, python)


DEFAULT_IMAGES = tuple(ImageMapping(name, None, None, SERVER_PYTHON) for name in FRAMEWORKS)


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What the server's Host guard allows, and the images the SageMaker API runs."""

    allowed_hosts: tuple[str, ...] = ()
    """Extra Host names the server answers to (beyond loopback and its bind address); "*": any."""

    images: tuple[ImageMapping, ...] = DEFAULT_IMAGES
    """Which Python runs a TrainingImage; by default every framework image on the server's."""

    @classmethod
    def read(cls, source: SettingsSource) -> ServerSettings:
        """``allowed_hosts`` and ``images``; the variables win (set but empty: none)."""
        hosts = source.names("allowed_hosts", "TRAINOPS_ALLOWED_HOSTS", noun="host names")
        entries = source.names("images", "TRAINOPS_IMAGES", noun="IMAGE=PYTHON entries")
        images = DEFAULT_IMAGES
        if entries is not None:
            images = tuple(_mapping(source, entry) for entry in entries)
        return cls(allowed_hosts=hosts or (), images=images)


def _mapping(source: SettingsSource, entry: str) -> ImageMapping:
    try:
        return ImageMapping.parse(entry)
    except ValueError as exc:
        raise source.entry_error("images", "TRAINOPS_IMAGES", entry, str(exc)) from None
