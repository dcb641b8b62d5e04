"""The spec's YAML reader refuses duplicate keys and alias bombs, naming the line."""

from __future__ import annotations

import pytest

from trainops import SpecError
from trainops.spec import parse_spec
from trainops.spec._yaml import ALIAS_BUDGET


def _error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="job.yaml")
    [(path, reason)] = info.value.problems
    assert path == ""
    return reason


def alias_bomb(levels: int = 8, width: int = 9) -> str:
    """The "billion laughs" shape: each level lists the previous one ``width`` times."""
    lines = ["entry_point: train.py", "hyperparameters:", "  a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels + 1):
        lines.append(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_the_alias_that_exceeds_the_budget() -> None:
    reason = _error(alias_bomb())
    assert reason.startswith("line 7, column ")
    assert f"aliases expand to more than {ALIAS_BUDGET:,} values" in reason


def test_a_few_aliases_and_merge_keys_are_fine() -> None:
    text = (
        "entry_point: train.py\n"
        "hyperparameters: &hp {lr: 0.1, layers: &l [1, 2, 3]}\n"
        "environment: {A: '1'}\n"
        "inputs:\n"
        "  train: &ch {uri: s3://b/train/, content_type: text/csv}\n"
        "  test: {<<: *ch, uri: s3://b/test/}\n"
    )
    spec = parse_spec(text)
    assert spec.inputs["test"].content_type == "text/csv"
    assert spec.inputs["test"].uri == "s3://b/test/"


def test_a_recursive_alias_is_refused() -> None:
    reason = _error("entry_point: train.py\nhyperparameters: &h {a: *h}\n")
    assert reason.startswith("line 2, column ") and "alias *h refers to itself" in reason


@pytest.mark.parametrize(
    ("text", "field", "first"),
    [
        ("entry_point: a.py\ninstance_count: 1\ninstance_count: 2\n", "instance_count (line 3)", 2),
        (
            "entry_point: a.py\nhyperparameters:\n  lr: 1\n  b: 2\n  lr: 3\n",
            "hyperparameters.lr (line 5)",
            3,
        ),
        (
            "entry_point: a.py\ninputs:\n  t: {uri: s3://b/x, uri: s3://b/y}\n",
            "inputs.t.uri (line 3)",
            3,
        ),
        (
            "entry_point: a.py\nmetric_definitions:\n- {name: a, name: b}\n",
            "metric_definitions.0.name (line 3)",
            3,
        ),
    ],
)
def test_duplicate_keys_are_refused_with_their_field_and_line(
    text: str, field: str, first: int
) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="job.yaml")
    [(path, reason)] = info.value.problems
    assert path == field
    assert reason.startswith(f"duplicate key (first on line {first})")


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    assert "nested too deeply" in _error("entry_point: " + "[" * 50_000)
