"""Rules added to a running job's stored spec (UpdateTrainingJob): the spec's other rules, custom
and debugger ones included, survive the round trip; the spec's own checks hold over the whole
list; profiler rules need a job that profiles."""

from __future__ import annotations

from typing import Any

import pytest

from trainops import SpecError
from trainops.control._rules_update import with_rules
from trainops.protocol import SubmittedJob
from trainops.spec import JobSpec


def _spec(**fields: Any) -> SubmittedJob:
    return JobSpec(entry_point="t.py", source_dir=".", **fields).view()


def _problem(spec: SubmittedJob, rules: list[dict[str, Any]]) -> str:
    with pytest.raises(SpecError) as caught:
        with_rules(spec, rules)
    [(field, reason)] = caught.value.problems
    assert field == "rules"
    return reason


def test_added_rules_follow_the_job_s_own_which_survive() -> None:
    custom = {"name": "mine", "source": "rules/r.py", "rule_to_invoke": "MyRule"}
    spec = _spec(rules=[custom, "VanishingGradient", "CPUBottleneck"])
    updated = with_rules(spec, [{"name": "io", "rule": "IOBottleneck"}])
    assert [(r.name, r.kind) for r in updated.rules] == [
        ("mine", "custom"),
        ("VanishingGradient", "debugger"),
        ("CPUBottleneck", "profiler"),
        ("io", "profiler"),
    ]
    assert updated.rules[:3] == spec.rules
    assert updated.debugger_hook_config == spec.debugger_hook_config
    assert SubmittedJob.from_json(updated.to_json()) == updated  # stored as it reads back


def test_the_spec_s_checks_hold_over_the_whole_list() -> None:
    spec = _spec(rules=["CPUBottleneck"])
    assert "has a rule named CPUBottleneck already" in _problem(spec, [{"rule": "CPUBottleneck"}])
    many = [{"name": f"r{i}", "rule": "IOBottleneck"} for i in range(20)]
    assert "21 profiler rules" in _problem(spec, many)
    assert "ProfilerReport may be given once" in _problem(
        spec, [{"name": "a", "rule": "ProfilerReport"}, {"name": "b", "rule": "ProfilerReport"}]
    )
    assert "not a built-in rule" in _problem(spec, [{"rule": "../../etc/passwd"}])


def test_profiler_rules_need_a_job_that_profiles() -> None:
    for spec in (_spec(), _spec(profiler_config={"disable_profiler": True})):
        assert "run without the profiler" in _problem(spec, [{"rule": "CPUBottleneck"}])
