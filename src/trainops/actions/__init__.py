"""Actions: what happens when a rule finds an issue, besides recording it.

One mechanism for every kind of rule: :func:`run_actions` runs a :class:`Finding`'s actions
(``stop_training``, ``webhook``, ``command``: the runners registered in :data:`ACTIONS`) and returns an
:class:`ActionResult` for each. A webhook goes only where a :class:`WebhookPolicy` allows; a
command runs on the job's first host while it runs (``ActionContext.on_host``), else here with
the job's recorded environment (:func:`job_environment`), never the server's. docs/internals/actions.md says how to add a kind.
"""

from __future__ import annotations

from trainops.actions._base import ActionContext, ActionResult, Finding, OnHost, display_url
from trainops.actions._destinations import NETWORK_NAMES, WebhookPolicy
from trainops.actions._environment import job_environment
from trainops.actions._run import ACTIONS, ActionRunner, run_actions

__all__ = [
    "ACTIONS",
    "NETWORK_NAMES",
    "ActionContext",
    "ActionResult",
    "ActionRunner",
    "Finding",
    "OnHost",
    "WebhookPolicy",
    "display_url",
    "job_environment",
    "run_actions",
]
