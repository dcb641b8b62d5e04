"""``Rule`` and ``ProfilerRule``: the SageMaker SDK's way to put a built-in rule in ``rules``.

``Rule.sagemaker(rule_configs.vanishing_gradient(), rule_parameters={"threshold": "1e-5"},
actions=rule_configs.ActionList(rule_configs.StopTraining()))`` is the job spec's
``{rule: VanishingGradient, rule_parameters: {...}, actions: [stop_training]}`` (a
:class:`~trainops.spec.RuleConfig`); ``ProfilerRule.sagemaker(rule_configs.CPUBottleneck())``
likewise. Arguments that place rule containers (``container_local_output_path``,
``s3_output_path``: trainops writes rule output under ``<job>/rule-output``) are accepted and
left unused, as the SDK's local mode does; ``collections_to_save`` is refused (the rule's default
collections are merged into ``debugger_hook_config``; configure other collections there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainops._errors import SpecError
from trainops.spec import RuleConfig, rule_definition

__all__ = ["ProfilerRule", "Rule"]


def _config(
    base_config: Mapping[str, Any],
    kind: str,
    name: str | None,
    rule_parameters: Mapping[str, Any] | None,
    actions: Sequence[Any] | str | None,
) -> RuleConfig:
    rule = base_config.get("rule") if isinstance(base_config, Mapping) else None
    if not isinstance(rule, str):
        raise SpecError([("rules", f"not a rule_configs base configuration: {base_config!r}")])
    try:
        found = rule_definition(rule).kind
    except KeyError as exc:
        raise SpecError([("rules", str(exc.args[0]))]) from None
    if found != kind:
        use = "Rule.sagemaker" if found == "debugger" else "ProfilerRule.sagemaker"
        raise SpecError([("rules", f"{rule} is a {found} rule: use {use}")])
    parameters = {**base_config.get("rule_parameters", {}), **(rule_parameters or {})}
    listed = [actions] if isinstance(actions, str) else list(actions or [])
    fields: dict[str, Any] = {"rule": rule, "rule_parameters": parameters, "actions": listed}
    if name is not None:
        fields["name"] = name
    return RuleConfig(**fields)


class Rule:
    """A debugger rule (``sagemaker.debugger.Rule``)."""

    @classmethod
    def sagemaker(
        cls,
        base_config: Mapping[str, Any],
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_output_paths: Sequence[str] | None = None,
        rule_parameters: Mapping[str, Any] | None = None,
        collections_to_save: Sequence[Any] | None = None,
        actions: Sequence[Any] | str | None = None,
    ) -> RuleConfig:
        """The built-in debugger rule ``base_config`` (``rule_configs.x()``) as a rule entry."""
        del container_local_output_path, s3_output_path
        if collections_to_save:
            raise SpecError(
                [
                    (
                        "rules",
                        "collections_to_save: configure collections in debugger_hook_config "
                        "(the rule's own collections join it by themselves)",
                    )
                ]
            )
        parameters = dict(rule_parameters or {})
        if other_trials_s3_output_paths:
            paths = list(other_trials_s3_output_paths)
            if len(paths) != 1:
                raise SpecError([("rules", "other_trials_s3_output_paths: give exactly one")])
            parameters.setdefault("other_trials", paths[0])
        return _config(base_config, "debugger", name, parameters, actions)


class ProfilerRule:
    """A profiler rule (``sagemaker.debugger.ProfilerRule``)."""

    @classmethod
    def sagemaker(
        cls,
        base_config: Mapping[str, Any],
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
    ) -> RuleConfig:
        """The built-in profiler rule ``base_config`` (``rule_configs.X(...)``) as a rule entry."""
        del container_local_output_path, s3_output_path
        return _config(base_config, "profiler", name, None, None)
