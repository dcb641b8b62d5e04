"""``container_entrypoint`` and ``container_args``: a command run instead of the entry point (an
argv list, as SageMaker's ContainerEntrypoint and ContainerArguments), refused where it could
not run as the request means it."""

from __future__ import annotations

from typing import Any

import pytest

from trainops import SpecError
from trainops.spec import JobSpec, validate_spec


def _spec(**fields: Any) -> dict[str, Any]:
    return {"entry_point": "bash", "container_entrypoint": ["/bin/bash"], **fields}


def _problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        validate_spec(data)
    return list(caught.value.problems)


def test_the_command_reaches_the_stored_view_as_given() -> None:
    args = ["-c", "$(id); `id` && echo '<b>'"]  # text, never given to a shell by trainops
    view = JobSpec(**_spec(container_args=args)).view()
    assert view.container_entrypoint == ["/bin/bash"]
    assert view.container_args == args
    plain = JobSpec(entry_point="train.py").view()
    assert (plain.container_entrypoint, plain.container_args) == (None, [])


@pytest.mark.parametrize(
    ("fields", "where", "words"),
    [
        ({"container_entrypoint": []}, "container_entrypoint", "at least 1"),
        ({"container_entrypoint": [""]}, "container_entrypoint", "item 0 must be 1-256"),
        ({"container_entrypoint": ["a\x00b"]}, "container_entrypoint", "NUL"),
        ({"container_args": ["x" * 257]}, "container_args", "item 0 must be 1-256"),
        ({"container_args": ["x"] * 101}, "container_args", "at most 100"),
        ({"mount_opt_ml": False}, "mount_opt_ml", "reads the tree at /opt/ml"),
        (
            {"entry_point": "t.py", "distribution": {"torch_distributed": {"enabled": True}}},
            "distribution",
            "a launcher cannot start container_entrypoint",
        ),
    ],
)
def test_a_command_that_cannot_run_is_refused_where_it_is(
    fields: dict[str, Any], where: str, words: str
) -> None:
    problems = _problems(_spec(**fields))
    assert any(field == where and words in why for field, why in problems), problems


def test_arguments_without_a_command_are_refused() -> None:
    problems = _problems({"entry_point": "train.py", "container_args": ["x"]})
    assert ("container_args", "needs container_entrypoint") in problems
