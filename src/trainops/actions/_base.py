"""What an action acts on: a :class:`Finding` (a rule's verdict on a job), and what it did.

Every finding is recorded by whoever made it (a rule's evaluation row); the actions named in
the spec then run once per finding: ``stop_training``, ``webhook`` or ``command``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from trainops.actions._destinations import WebhookPolicy

__all__ = ["ActionContext", "ActionResult", "Finding", "OnHost", "display_url"]


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule's verdict: ``status`` (IssuesFound, ...), a one-line ``details``, the
    ``recommendation``, and the ``evidence`` (numbers that show it)."""

    job: str
    rule_name: str
    rule: str
    status: str
    details: str
    recommendation: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def payload(self) -> bytes:
        """The JSON body a webhook receives and a command reads on its standard input."""
        return json.dumps({"source": "trainops", **self.to_json()}, default=str).encode()


@dataclass(frozen=True, slots=True)
class ActionResult:
    """How one action went: ``ok``, and a line saying what happened."""

    type: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ActionContext:
    """What actions may do: stop a job (``stop_job(name, message)`` -> began stopping), reach
    the webhooks ``webhooks`` allows, and run commands: on the job's first host while it runs
    (``on_host(argv, stdin, variables, timeout)``: how it went there, or why no host ran it),
    else here with ``environment`` (the job's recorded environment, see ``_environment.py``)
    and nothing else."""

    stop_job: Callable[[str, str], bool]
    webhooks: WebhookPolicy = field(default_factory=WebhookPolicy)
    environment: Mapping[str, str] = field(default_factory=dict)
    on_host: OnHost | None = None


#: Runs a command action on the job's host: ``on_host(argv, stdin, variables, timeout)``
#: returns the host's report (``host``, ``ran``, ``exit_code``, ``timed_out``, ``output``,
#: ``error``), or a string saying why no host ran it.
OnHost = Callable[[list[str], str, dict[str, str], float], "dict[str, Any] | str"]


def display_url(url: str) -> str:
    """``url`` fit for records and logs: scheme and host only, since a webhook's path and
    query often are its secret (Slack, Teams, Discord hooks)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    rest = "/***" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{rest}"
