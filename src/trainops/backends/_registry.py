"""The one table of backends: a name (as in ``backend:`` settings and ``/info``) to its class.

:func:`backend_for` builds the backend a control plane's settings name (``backend: local`` in
config.yaml, ``TRAINOPS_BACKEND``, ``trainops server --backend``); a name that is not in the
table is a configuration error that lists the names that are.
"""

from __future__ import annotations

from trainops._errors import ConfigError
from trainops._settings import Settings
from trainops.backends._base import Backend
from trainops.backends._local import LocalBackend
from trainops.backends._ray import RayBackend

__all__ = ["BACKENDS", "backend_for"]

BACKENDS: dict[str, type[Backend]] = {"local": LocalBackend, "ray": RayBackend}


def backend_for(settings: Settings) -> Backend:
    """A new backend of the kind ``settings.backend`` names."""
    try:
        kind = BACKENDS[settings.backend]
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise ConfigError(
            f"backend {settings.backend!r} is not one this trainops has (available: {known})"
        ) from None
    return kind(settings)
