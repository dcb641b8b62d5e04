"""Placing waiting jobs: first fit in submission order, all hosts of a job at once.

A job that fits gets its hosts' trees and one agent per host, each with an agent token of its
own (only its hash is stored, on the host's record): a token speaks for one host of one attempt
and nothing else. A job that does not fit goes Pending with a message saying what it waits for.
The waiting jobs come from ``core.waiting`` (see ``_queue``): a pass tries the oldest job of
each need and reads no other job's record, so it costs the same with ten or ten thousand jobs
waiting. Callers hold ``core.lock``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from trainops._errors import TrainopsError
from trainops.backends import CapacityNeverFits, CapacityShortage, HostPlacement
from trainops.catalog import get_instance_type
from trainops.control._core import ControlCore
from trainops.control._credentials import job_grant, manifest_prefixes
from trainops.control._lifecycle import Lifecycle
from trainops.control._queue import Need
from trainops.control._status import (
    HOST_LOST,
    STARTING_MESSAGE,
    PrimaryStatus,
    SecondaryStatus,
)
from trainops.protocol import AgentLaunch, Assignment, HostResources
from trainops.storage import store_for
from trainops.store import HostState, JobRecord, NewHost

__all__ = ["Placement", "attempt_dir", "host_assignment", "token_hash"]

_WAITING = (SecondaryStatus.STARTING, SecondaryStatus.PENDING)


def token_hash(token: str) -> str:
    """The SHA-256 of an agent token (hex): what the store keeps instead of the token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def attempt_dir(core: ControlCore, job: str, attempt: int) -> Path:
    """``jobs/<job>/attempt-<n>``: host trees in ``<host>/``, agent state in ``.agents/<host>/``."""
    return core.settings.jobs_dir / job / f"attempt-{attempt}"


class Placement:
    """Starts waiting jobs when the backend has room for them."""

    def __init__(self, core: ControlCore, lifecycle: Lifecycle) -> None:
        self.core = core
        self.lifecycle = lifecycle

    def load_waiting(self) -> None:
        """Queue the jobs the store says wait (once, when the control plane starts)."""
        for job in self.core.store.unplaced_jobs(PrimaryStatus.IN_PROGRESS, _WAITING):
            self.core.waiting.add(job)

    def place_waiting(self) -> None:
        """Place what fits now, oldest first; each need stops at its first job that waits."""
        if not self.core.backend.fits_by_need:
            self._place_each()
            return
        queue = self.core.waiting
        heads = queue.heads()
        heapq.heapify(heads)
        while heads:
            _, name, need = heapq.heappop(heads)
            job = self._still_waiting(name)
            shortage = None if job is None else self._place(job)
            if shortage is not None:
                self._tell_waiting(need, shortage)
                continue  # the later jobs of this need do not fit either
            queue.pop(need, name)
            following = queue.next_of(need)
            if following is not None:
                heapq.heappush(heads, (*following, need))

    def _place_each(self) -> None:
        """Ask the backend about every waiting job, oldest first (see ``fits_by_need``)."""
        for _, name, need in self.core.waiting.queued():
            job = self._still_waiting(name)
            shortage = None if job is None else self._place(job)
            if shortage is None:
                self.core.waiting.remove(need, name)
            else:
                self._tell_waiting(need, shortage)

    def _still_waiting(self, name: str) -> JobRecord | None:
        """The job's record if it still waits to be placed (it may have been stopped)."""
        job = self.core.store.get_job(name)
        if (
            job is None
            or job.status != PrimaryStatus.IN_PROGRESS
            or job.secondary_status not in _WAITING
            or job.stop_reason is not None
            or self.core.store.hosts(name, job.attempt)
        ):
            return None
        return job

    def _tell_waiting(self, need: Need, shortage: str) -> None:
        """Jobs of ``need`` queued since it last waited go Pending (the oldest already has)."""
        for name in self.core.waiting.take_untold(need):
            job = self._still_waiting(name)
            if job is not None and job.secondary_status != SecondaryStatus.PENDING:
                message = f"Waiting for capacity: {shortage}"
                self.core.set_secondary(job, SecondaryStatus.PENDING, message)

    def _place(self, job: JobRecord) -> str | None:
        """Start ``job`` if it fits (or fail it if it never can); else what it waits for."""
        instance = get_instance_type(job.spec.instance_type)
        count = job.spec.instance_count
        try:
            placements = self.core.backend.reserve(job.name, instance, count)
        except CapacityNeverFits as never:
            self.lifecycle.fail_unplaced(job, f"CapacityError: {never}")
            return None
        except CapacityShortage as shortage:
            if job.secondary_status != SecondaryStatus.PENDING:
                message = f"Waiting for capacity: {shortage}"
                self.core.set_secondary(job, SecondaryStatus.PENDING, message)
            return str(shortage)
        if job.secondary_status == SecondaryStatus.PENDING:
            job = self.core.set_secondary(job, SecondaryStatus.STARTING, STARTING_MESSAGE)
        self._launch(job, placements)
        return None

    def _launch(self, job: JobRecord, placements: list[HostPlacement]) -> None:
        # Where each host's tree and agent state go; the backend and the agent create them where
        # the agent runs (nothing here touches a disk).
        base = attempt_dir(self.core, job.name, job.attempt)
        tokens = [secrets.token_urlsafe(32) for _ in placements]
        hosts = [
            _new_host(base, i + 1, p, token_hash(t))
            for i, (p, t) in enumerate(zip(placements, tokens, strict=True))
        ]
        self.core.store.create_hosts(job.name, job.attempt, hosts)
        job = self.core.update_job(
            job, training_start_time=job.training_start_time or self.core.now()
        )
        try:
            env = self._storage_env(job)
        except (TrainopsError, OSError) as exc:
            for host in hosts:
                self._not_started(job, host, f"could not issue the job's object-storage key: {exc}")
        else:
            for host, placement, token in zip(hosts, placements, tokens, strict=True):
                assignment = host_assignment(
                    self.core, job, job.attempt, host.host, host.resources, hosts
                )
                self._start_agent(job, host, placement, token, env, assignment)
        self.lifecycle.evaluate(job.name)

    def _storage_env(self, job: JobRecord) -> dict[str, str]:
        """The job's own object-storage key for its agents, where the store issues them (the
        variables win over the backend's own: the agents never see the server's key)."""
        credentials = self.core.credentials
        if credentials is None:
            return {}
        manifests = manifest_prefixes(job, self._head)
        return credentials.issue(job.name, job_grant(job, manifests))

    def _head(self, uri: str, size: int) -> bytes:
        """The first ``size`` bytes of the object at ``uri`` (read with the server's key)."""
        return store_for(uri, self.core.settings).get_range(uri, 0, size)

    def _start_agent(
        self,
        job: JobRecord,
        host: NewHost,
        placement: HostPlacement,
        token: str,
        env: dict[str, str],
        assignment: Assignment,
    ) -> None:
        launch = AgentLaunch(
            server_url=self.core.server_url,
            token=token,
            job_name=job.name,
            host=host.host,
            attempt=job.attempt,
            root=Path(host.root),
            state_dir=Path(host.state_dir),
            assignment=assignment,  # handed over where the backend can: no round trip
        )
        try:
            handle = self.core.backend.launch(launch, placement.resources, env)
        except OSError as exc:
            self._not_started(job, host, f"could not start the host agent: {exc}")
            return
        self.core.record_agent(job.name, host.host, job.attempt, handle)

    def _not_started(self, job: JobRecord, host: NewHost, reason: str) -> None:
        self.core.store.update_host(
            job.name,
            host.host,
            job.attempt,
            state=HostState.EXITED,
            outcome=HOST_LOST,
            failure_reason=reason,
            exit_time=self.core.now(),
        )


def _new_host(base: Path, index: int, placement: HostPlacement, token_sha: str) -> NewHost:
    name = f"algo-{index}"
    return NewHost(
        host=name,
        root=str(base / name),
        state_dir=str(base / ".agents" / name),
        resources=dataclasses.asdict(placement.resources),
        reservation=placement.reservation,
        token_hash=token_sha,
    )


class _HostLike(Protocol):
    """A host about to be created (``NewHost``) or stored (``HostRecord``)."""

    @property
    def host(self) -> str: ...

    @property
    def reservation(self) -> dict[str, Any]: ...


def host_assignment(
    core: ControlCore,
    job: JobRecord,
    attempt: int,
    host: str,
    resources: Mapping[str, Any],
    hosts: Sequence[_HostLike],
) -> Assignment:
    """What host ``host`` of ``job``'s ``attempt`` is to run: the agent API's answer, and what
    a backend hands its agent at launch."""
    addresses = {h.host: core.backend.host_address(h.reservation) for h in hosts}
    return Assignment(
        job_name=job.name,
        attempt=attempt,
        current_host=host,
        hosts=[h.host for h in hosts],
        spec=job.spec,
        code_uri=job.code_uri,
        output_prefix=job.output_prefix,
        resources=HostResources(**resources),
        region=core.settings.region,
        host_addresses=_known(addresses),
    )


def _known(addresses: dict[str, str | None]) -> dict[str, str]:
    """Every host's address, or none: a job whose hosts are not all on known, distinct machines
    has them share this one (a loopback address each)."""
    found = {host: address for host, address in addresses.items() if address}
    distinct = len(set(found.values())) == len(addresses)
    return found if found and len(found) == len(addresses) and distinct else {}
