"""Actions: what happens when a rule finds an issue, besides recording it.

One mechanism for every kind of rule: :func:`run_actions` runs a :class:`Finding`'s actions
(``stop_training``, ``webhook``, ``command``; see ``_run``) and returns an
:class:`ActionResult` for each. docs/internals/actions.md says how to add a kind.
"""

from __future__ import annotations

from trainops.actions._base import ActionContext, ActionResult, Finding, display_url
from trainops.actions._run import run_actions

__all__ = ["ActionContext", "ActionResult", "Finding", "display_url", "run_actions"]
