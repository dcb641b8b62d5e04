"""A job's sidecars on one host, run through the agent's phases as one.

Every sidecar gets each call even when one before it failed; the first failure is raised once
all have had their turn, so one sidecar's broken upload never keeps another's from finishing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from trainops._registry import Registry
from trainops.agent.contract._outputs import Artifact
from trainops.agent.sidecars._base import Sidecar, SidecarContext, SidecarFactory

__all__ = ["SIDECARS", "Sidecars", "register_sidecar"]

T = TypeVar("T")

#: name -> factory, in start order.
SIDECARS: Registry[SidecarFactory] = Registry("sidecar", error=ValueError)


def register_sidecar(name: str, factory: SidecarFactory) -> None:
    """Add a kind of sidecar (``SIDECARS.register``); a name taken already is refused."""
    SIDECARS.register(name, factory)


class Sidecars:
    """The sidecars a job asks for on this host, made from :data:`SIDECARS` in order."""

    def __init__(self, context: SidecarContext) -> None:
        self.context = context
        self.members: list[Sidecar] = []
        for factory in SIDECARS.values():
            sidecar = factory(context)
            if sidecar is not None:
                self.members.append(sidecar)

    def prepare(self) -> None:
        _each(self.members, lambda sidecar: sidecar.prepare())

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with every sidecar's variables set, in order (each sees the ones before)."""
        merged = dict(env)
        for sidecar in self.members:
            merged.update(_checked_env(sidecar, sidecar.environment(merged)))
        return merged

    def start(self) -> None:
        """Start each in order; one that fails to start aborts them all."""
        for sidecar in self.members:
            try:
                sidecar.start()
            except BaseException:
                self.abort()
                raise

    def before_kill(self) -> None:
        _each(self.members, lambda sidecar: sidecar.before_kill())

    def script_killed(self, signum: int, when: float) -> None:
        _each(self.members, lambda sidecar: sidecar.script_killed(signum, when))

    def finish(self) -> list[Artifact]:
        """Finish every member, last first (also one never started: the job ended before its
        script began); their artifacts in start order."""
        artifacts: dict[int, list[Artifact]] = {}

        def finish_one(index: int) -> None:
            artifacts[index] = self.members[index].finish()

        _each(list(reversed(range(len(self.members)))), finish_one)
        return [a for i in sorted(artifacts) for a in artifacts[i]]

    def abort(self) -> None:
        _each(list(reversed(self.members)), lambda sidecar: sidecar.abort())


def _each(items: Sequence[T], call: Callable[[T], None]) -> None:
    """``call`` on every item, even after one failed; the first failure is raised afterwards."""
    first: Exception | None = None
    for item in items:
        try:
            call(item)
        except Exception as exc:
            if first is None:
                first = exc
    if first is not None:
        raise first


def _checked_env(sidecar: Sidecar, env: Mapping[str, str]) -> Mapping[str, str]:
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(f"sidecar {sidecar.name}: bad environment variable {key!r}")
    return env
