"""Managed spot in the job spec: SageMaker's rules, each refusal naming its field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from trainops._errors import SpecError
from trainops.spec import JobSpec, parse_spec


def problem(**fields: Any) -> tuple[str, str]:
    with pytest.raises(SpecError) as caught:
        JobSpec(entry_point="t.py", **fields)
    [found] = caught.value.problems
    return found


def test_a_spot_job_needs_max_wait_at_least_its_runtime() -> None:
    path, reason = problem(use_spot_instances=True)
    assert path == "stopping_condition.max_wait_time_in_seconds"
    assert "a spot job needs it" in reason and "86400" in reason
    stopping = {"max_runtime_in_seconds": 100, "max_wait_time_in_seconds": 50}
    path, reason = problem(use_spot_instances=True, stopping_condition=stopping)
    assert path == "stopping_condition.max_wait_time_in_seconds"
    assert "less than max_runtime_in_seconds (100)" in reason and "at least 100" in reason


def test_max_wait_and_chaos_need_spot() -> None:
    path, reason = problem(stopping_condition={"max_wait_time_in_seconds": 100})
    assert path == "stopping_condition.max_wait_time_in_seconds"
    assert "use_spot_instances: true" in reason
    path, reason = problem(chaos={"seed": 1})
    assert (path, "use_spot_instances: true" in reason) == ("chaos", True)


def test_a_spot_spec_in_yaml_and_its_view() -> None:
    text = (
        "entry_point: t.py\nuse_spot_instances: true\n"
        "stopping_condition: {max_runtime_in_seconds: 60, max_wait_time_in_seconds: 600}\n"
        "checkpoint: {uri: 's3://b/ckpt'}\nchaos: {seed: 3, interruptions: 2}\n"
    )
    view = parse_spec(text).view()
    assert view.use_spot_instances and view.max_wait_seconds == 600.0
    assert view.chaos is not None and (view.chaos.seed, view.chaos.interruptions) == (3, 2)


def test_the_sdks_names_set_the_fields_and_their_rules_hold() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec("entry_point: t.py\nmax_wait: 3600\n")
    [(path, reason)] = caught.value.problems
    assert path == "stopping_condition.max_wait_time_in_seconds"
    assert "applies to spot jobs only" in reason
    spec = parse_spec("entry_point: t.py\nuse_spot_instances: true\nmax_run: 60\nmax_wait: 600\n")
    assert spec.view().max_wait_seconds == 600.0


@pytest.mark.parametrize("value", [0, -5, 10**12, "soon", True])
def test_hostile_max_wait_values_are_refused(value: Any) -> None:
    stopping = {"max_runtime_in_seconds": 1, "max_wait_time_in_seconds": value}
    path, _ = problem(use_spot_instances=True, stopping_condition=stopping)
    assert path == "stopping_condition.max_wait_time_in_seconds"
