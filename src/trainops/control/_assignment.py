"""What a host agent is told to do: its :class:`~trainops.protocol.Assignment`, built from the
job's record and its hosts, the same whether the agent fetches it (``GET .../assignment``) or
the placement hands it over with the launch (a single-host job: one round trip fewer before the
script starts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainops.protocol import Assignment, HostResources
from trainops.store import JobRecord

__all__ = ["host_assignment"]


def host_assignment(
    job: JobRecord,
    host: str,
    hosts: Sequence[str],
    resources: HostResources,
    addresses: Mapping[str, str | None],
    region: str,
) -> Assignment:
    """The assignment of ``host``, one of the job's ``hosts`` (its current attempt's)."""
    return Assignment(
        job_name=job.name,
        attempt=job.attempt,
        current_host=host,
        hosts=list(hosts),
        spec=job.spec,
        code_uri=job.code_uri,
        output_prefix=job.output_prefix,
        resources=resources,
        region=region,
        host_addresses=_known(addresses),
    )


def _known(addresses: Mapping[str, str | None]) -> dict[str, str]:
    """Every host's address, or none: a job whose hosts are not all on known, distinct machines
    has them share this one (a loopback address each)."""
    found = {host: address for host, address in addresses.items() if address}
    distinct = len(set(found.values())) == len(addresses)
    return found if found and len(found) == len(addresses) and distinct else {}
