"""The backends' settings: what the local backend may hand out, and how Ray lays hosts out.

``local:`` in config.yaml (or ``TRAINOPS_LOCAL_*``) and ``ray:`` (or ``TRAINOPS_RAY_*``);
docs/local-backend.md, docs/ray.md and docs/configuration.md say what each does.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainops._settings_source import SettingsSource

__all__ = ["RAY_PLACEMENTS", "LocalCapacity", "RaySettings"]

#: ``ray.placement`` values and the Ray placement-group strategy each one asks for.
RAY_PLACEMENTS = {"strict_spread": "STRICT_SPREAD", "spread": "SPREAD"}


@dataclass(frozen=True, slots=True)
class LocalCapacity:
    """What the local backend may hand out; ``None`` means "what the machine has"."""

    cpus: int | None = None
    memory_mb: int | None = None
    gpus: int | None = None

    @classmethod
    def read(cls, source: SettingsSource) -> LocalCapacity:
        """``local:`` in config.yaml; the ``TRAINOPS_LOCAL_*`` variables win."""
        local = source.within("local")
        return cls(
            cpus=local.whole_number("cpus", "TRAINOPS_LOCAL_CPUS"),
            memory_mb=local.whole_number("memory_mb", "TRAINOPS_LOCAL_MEMORY_MB"),
            gpus=local.whole_number("gpus", "TRAINOPS_LOCAL_GPUS"),
        )


@dataclass(frozen=True, slots=True)
class RaySettings:
    """How the Ray backend reaches its cluster and lays a job's hosts out on it.

    ``address`` is what ``ray.init`` takes (``auto``: the cluster this machine's ``ray start``
    joined; ``HOST:PORT``: its head). ``placement``: ``strict_spread`` puts every host of a job
    on a node of its own (a job that the cluster cannot spread waits, or fails if no set of its
    nodes ever could), ``spread`` prefers distinct nodes and shares them when it must.
    ``autoscaling``: the cluster grows on demand, so a job no node can hold now waits for the
    autoscaler instead of failing.
    """

    address: str | None = None
    namespace: str = "trainops"
    placement: str = "strict_spread"
    autoscaling: bool = False

    @classmethod
    def read(cls, source: SettingsSource) -> RaySettings:
        """``ray:`` in config.yaml; the ``TRAINOPS_RAY_*`` variables win."""
        ray = source.within("ray")
        default = cls()
        placement = ray.choice("placement", "TRAINOPS_RAY_PLACEMENT", choices=tuple(RAY_PLACEMENTS))
        autoscaling = ray.flag("autoscaling", "TRAINOPS_RAY_AUTOSCALING")
        return cls(
            address=ray.text("address", "TRAINOPS_RAY_ADDRESS"),
            namespace=ray.text("namespace", "TRAINOPS_RAY_NAMESPACE") or default.namespace,
            placement=placement or default.placement,
            autoscaling=default.autoscaling if autoscaling is None else autoscaling,
        )
