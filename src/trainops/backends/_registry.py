"""The one table of backends: a name (as in ``backend:`` settings and ``/info``) to its class.

:func:`backend_for` builds the backend a control plane's settings name (``backend: local`` in
config.yaml, ``TRAINOPS_BACKEND``, ``trainops server --backend``); a name that is not in the
table is a configuration error that lists the names that are. Ray's backend is a lazy entry:
its module is imported only by a control plane that uses it.
"""

from __future__ import annotations

from trainops._errors import ConfigError
from trainops._registry import Registry
from trainops._settings import Settings
from trainops.backends._base import Backend
from trainops.backends._local import LocalBackend

__all__ = ["BACKENDS", "backend_for"]

BACKENDS: Registry[type[Backend]] = Registry("backend", error=ConfigError)
BACKENDS.register("local", LocalBackend)
BACKENDS.register_lazy("ray", "trainops.backends._ray:RayBackend")


def backend_for(settings: Settings) -> Backend:
    """A new backend of the kind ``settings.backend`` names."""
    return BACKENDS.lookup(settings.backend)(settings)
