"""TrainingImage to a local Python: the server's ``images`` setting applied to an image URI.

A SageMaker framework image is an ECR URI of the shape the SageMaker Python SDK's
``image_uris.retrieve`` produces (``<account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>:
<tag>``, the tag starting with the framework's version: ``2.3.0-cpu-py311``, ``1.2-1``). The
most specific entry wins: an exact URI, then the framework with the longest matching version,
then the framework alone. An image no entry matches fails CreateTrainingJob at once, saying
how to map it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainops.server._settings import FRAMEWORKS, SERVER_PYTHON, ImageMapping
from trainops.server.aws._errors import AwsError

__all__ = ["framework_of", "python_for"]

_ECR = re.compile(
    r"[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+)(?::(?P<tag>[A-Za-z0-9._-]+))?"
)
_TAG_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_REPOSITORIES = {repository: name for name, repository in FRAMEWORKS.items()}


def framework_of(image: str) -> tuple[str, str | None] | None:
    """``(framework, version)`` of a SageMaker framework image URI; None for any other."""
    found = _ECR.fullmatch(image)
    if found is None or found["repository"] not in _REPOSITORIES:
        return None
    version = _TAG_VERSION.match(found["tag"] or "")
    return _REPOSITORIES[found["repository"]], version[0] if version else None


def _matches(entry: ImageMapping, framework: str, version: str | None) -> bool:
    if entry.framework != framework:
        return False
    if entry.version is None:
        return True
    return version is not None and (
        version == entry.version or version.startswith(entry.version + ".")
    )


def python_for(image: str, mappings: Sequence[ImageMapping]) -> str | None:
    """The interpreter that runs ``image`` (None: the server's own); AwsError if none does."""
    for entry in mappings:
        if entry.uri is not None and entry.uri == image:
            return _target(entry)
    parsed = framework_of(image)
    if parsed is not None:
        candidates = [m for m in mappings if m.uri is None and _matches(m, *parsed)]
        if candidates:
            best = max(candidates, key=lambda m: len(m.version or ""))
            return _target(best)
    raise AwsError(
        400,
        "ValidationException",
        f"TrainingImage {image[:200]!r} has no mapping on this trainops server: "
        + _how_to_map(image, parsed),
    )


def _how_to_map(image: str, parsed: tuple[str, str | None] | None) -> str:
    """The entry to add, when one could map the image (never echoing what no entry can hold:
    a hostile name's control or bidirectional characters stay escaped in the repr above)."""
    if parsed is not None:
        framework, version = parsed
        key = f"{framework}:{version}" if version else framework
    else:
        key = image
    try:
        ImageMapping.parse(f"{key}={SERVER_PYTHON}")
    except ValueError:
        return (
            "no images entry can name it (an image URI has letters, digits and ._:/@+- only); "
            "use a SageMaker framework image or one the server's images setting maps"
        )
    return (
        "map it to a local Python in the server's images setting (config.yaml images: "
        f"['{key}={SERVER_PYTHON}'], or TRAINOPS_IMAGES), then restart it"
    )


def _target(entry: ImageMapping) -> str | None:
    return None if entry.python == SERVER_PYTHON else entry.python
