"""The one table of backends: a name (as in ``backend:`` settings and ``/info``) to its class."""

from __future__ import annotations

from trainops.backends._base import Backend
from trainops.backends._local import LocalBackend

__all__ = ["BACKENDS"]

BACKENDS: dict[str, type[Backend]] = {"local": LocalBackend}
