"""The cluster page (``/ui/cluster``): the backend's machines (one on the local backend, each
Ray node on the Ray backend), what each has and what is free (what ``trainops cluster`` shows),
and the hosts of the running jobs on each, live.

Its data is the API's own: ``GET /api/v1/cluster`` (``ClusterRoutes.cluster``) for the nodes,
``GET /api/v1/jobs?status=InProgress&status=Stopping&include=Hosts`` (each running job's
``Hosts``, with the ``Node`` each runs on, read for all of them at once) for what runs where.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from trainops.server.ui._page import PAGES, Page, PageRequest, esc

__all__ = ["CLUSTER_PAGE"]

_RUNNING = ["InProgress", "Stopping"]
_MAX_JOBS = 200
_UNPLACED = ""  # hosts whose node the backend did not name
_AMOUNTS = (("cpus", "CPUs"), ("memory_mb", "memory (MB)"), ("gpus", "GPUs"))


def render(request: PageRequest) -> str:
    return (
        '<h1>Cluster</h1><div id="cluster" class="live" data-live="/ui/cluster/-/nodes"'
        ' data-topics="jobs hosts">'
        f"{nodes(request)}</div>"
    )


def nodes(request: PageRequest) -> str:
    """The nodes with what they have, what is free and what runs there (live part ``nodes``)."""
    cluster = request.ui.cluster.cluster()
    found = cluster.get("nodes") or []
    placed = _hosts_by_node(request, [str(n["node"]) for n in found])
    heads = "".join(f"<th>{label} free / all</th>" for _key, label in _AMOUNTS)
    rows = "".join(_row(node, placed.get(str(node["node"]), [])) for node in found)
    rows = rows or '<tr><td colspan="5" class="empty">The backend has no nodes.</td></tr>'
    unplaced = placed.get(_UNPLACED)
    extra = f"<p>Running on no named node: {_hosts(unplaced)}</p>" if unplaced else ""
    return (
        f'<p>Backend: <code id="backend">{esc(cluster.get("backend"))}</code> · '
        f"{len(found)} node{'s' if len(found) != 1 else ''}</p>"
        f'<table class="cluster"><thead><tr><th>Node</th>{heads}<th>Running</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>{extra}"
    )


def _row(node: dict[str, Any], hosts: list[tuple[str, str]]) -> str:
    have, free = node.get("capacity") or {}, node.get("free") or {}
    cells = "".join(
        f'<td data-amount="{key}">{_meter(free.get(key, 0), have.get(key, 0))}</td>'
        for key, _label in _AMOUNTS
    )
    return (
        f'<tr data-node="{esc(node["node"])}"><td>{esc(node["node"])}</td>{cells}'
        f"<td>{_hosts(hosts) or '<small>nothing</small>'}</td></tr>"
    )


def _meter(free: int, have: int) -> str:
    used = max(have - free, 0)
    return f"{int(free)} / {int(have)}" + (
        f' <meter min="0" max="{int(have)}" value="{used}" title="{used} used">{used} used</meter>'
        if have
        else ""
    )


def _hosts(hosts: list[tuple[str, str]]) -> str:
    return "".join(f"<div>{_job_link(job)} <small>{esc(host)}</small></div>" for job, host in hosts)


def _job_link(name: str) -> str:
    if "job" in PAGES:
        return f'<a href="/ui/jobs/{esc(quote(name, safe=""))}">{esc(name)}</a>'
    return esc(name)


def _hosts_by_node(request: PageRequest, names: list[str]) -> dict[str, list[tuple[str, str]]]:
    """(job, host) of every running job's hosts, by the node each runs on; with one node only,
    a host whose node is not named is on it (the local backend's machine)."""
    jobs = request.ui.jobs.list_jobs(
        status=_RUNNING, name_contains=None, created_after=None, created_before=None,
        limit=_MAX_JOBS, include=["Hosts"],
    )["jobs"]  # fmt: skip
    placed: dict[str, list[tuple[str, str]]] = {}
    for job in jobs:
        name = str(job["TrainingJobName"])
        for host in job.get("Hosts") or []:
            node = host.get("Node") or (names[0] if len(names) == 1 else _UNPLACED)
            placed.setdefault(str(node), []).append((name, str(host.get("Host", ""))))
    return placed


CLUSTER_PAGE = Page(path="/ui/cluster", title="Cluster", render=render, nav=True,
                    parts={"nodes": nodes})  # fmt: skip
