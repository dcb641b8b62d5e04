"""Debugger rules in ``rules:``: the catalog of §5.6, SDK names, typed parameters, limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainops import JobSpec, SpecError
from trainops.protocol import SubmittedJob
from trainops.spec import (
    DEBUGGER_RULES,
    PROFILER_RULES,
    check_rule_parameters,
    load_raw_spec,
    load_spec,
    rule_definition,
)

SECTION_5_6 = {
    "VanishingGradient",
    "ExplodingTensor",
    "AllZero",
    "UnchangedTensor",
    "LossNotDecreasing",
    "Overfit",
    "Overtraining",
    "PoorWeightInitialization",
    "SaturatedActivation",
    "DeadRelu",
    "WeightUpdateRatio",
    "TensorVariance",
    "ClassImbalance",
    "Confusion",
    "CheckInputImages",
    "NLPSequenceRatio",
    "StalledTrainingRule",
    "SimilarAcrossRuns",
}


def spec(**fields: Any) -> JobSpec:
    return JobSpec(entry_point="train.py", **fields)


def problems(**fields: Any) -> str:
    with pytest.raises(SpecError) as info:
        spec(**fields)
    return str(info.value)


def test_the_catalog_holds_every_debugger_rule_of_the_reference() -> None:
    assert set(DEBUGGER_RULES) == SECTION_5_6 | {"Custom"}  # Custom: the job's own rule class
    assert not set(DEBUGGER_RULES) & set(PROFILER_RULES)
    assert {rule.kind for rule in DEBUGGER_RULES.values()} == {"debugger"}


def test_default_collections_follow_sagemakers_rule_configs() -> None:
    saved = {name: rule.collections for name, rule in DEBUGGER_RULES.items() if rule.collections}
    assert saved == {
        "VanishingGradient": (("gradients", {"save_interval": "500"}),),
        "LossNotDecreasing": (("losses", {"save_interval": "500"}),),
        "WeightUpdateRatio": (("weights", {"save_interval": "500"}),),
        "DeadRelu": (("relu_output", {"include_regex": ".*relu_output", "save_interval": "500"}),),
        "PoorWeightInitialization": (
            ("relu_input", {"include_regex": ".*relu_input", "save_interval": "500"}),
        ),
        "CheckInputImages": (
            (
                "input_image",
                {"include_regex": ".*hybridsequential0_input_0", "save_interval": "500"},
            ),
        ),
        "NLPSequenceRatio": (
            ("input_sequence", {"include_regex": ".*embedding0_input_0", "save_interval": "500"}),
        ),
    }


def test_defaults_resolve_as_documented() -> None:
    assert check_rule_parameters("VanishingGradient", {}) == {"threshold": 1e-7}
    assert check_rule_parameters("DeadRelu", {}) == {
        "tensor_regex": ".*relu_output",
        "threshold_inactivity": 1.0,
        "threshold_layer": 50.0,
    }
    loss = check_rule_parameters("LossNotDecreasing", {})
    assert loss["mode"] is None and loss["num_steps"] == 10 and loss["use_losses_collection"]


def test_sdk_names_and_string_values_resolve_to_typed_parameters() -> None:
    config = {
        "rule": "loss_not_decreasing",
        "rule_parameters": {
            "num_steps": "20",
            "diff_percent": "0.5",
            "use_losses_collection": "False",
            "mode": "eval",
            "collection_names": "losses, custom",
        },
    }
    job = spec(rules=[config]).view()
    (rule,) = job.rules
    assert (rule.rule, rule.name, rule.kind) == (
        "LossNotDecreasing",
        "LossNotDecreasing",
        "debugger",
    )
    assert rule.rule_parameters["num_steps"] == 20
    assert rule.rule_parameters["diff_percent"] == 0.5
    assert rule.rule_parameters["use_losses_collection"] is False
    assert rule.rule_parameters["mode"] == "EVAL"
    assert rule.rule_parameters["collection_names"] == ["losses", "custom"]
    assert rule_definition("loss_not_decreasing").name == "LossNotDecreasing"


def test_debugger_rules_do_not_turn_the_profiler_on_and_sit_beside_profiler_rules() -> None:
    assert spec(rules=["VanishingGradient"]).view().profiling is None
    off = {"disable_profiler": True}
    job = spec(rules=["DeadRelu"], profiler_config=off).view()
    assert [r.kind for r in job.rules] == ["debugger"]
    mixed = spec(rules=["DeadRelu", "StepOutlier"]).view()
    assert [r.name for r in mixed.debugger_rules] == ["DeadRelu"]
    assert [r.name for r in mixed.profiler_rules] == ["StepOutlier"]
    assert mixed.profiling is not None


def test_the_stored_dump_round_trips_and_older_dumps_read_as_profiler_rules() -> None:
    job = spec(rules=["exploding_tensor", "CPUBottleneck"])
    dump = job.model_dump(mode="json")
    assert JobSpec(**dump).view() == job.view()
    older = SubmittedJob.from_json(dump).to_json()
    for rule in older["rules"]:
        del rule["kind"]
    rules = SubmittedJob.from_json(older).rules
    assert [r.kind for r in rules] == ["profiler", "profiler"]


def test_twenty_of_each_kind() -> None:
    debugger = [{"rule": "AllZero", "name": f"zero-{i}"} for i in range(20)]
    profiler = [{"rule": "StepOutlier", "name": f"step-{i}"} for i in range(20)]
    assert len(spec(rules=debugger + profiler).rules) == 40
    extra = {"rule": "AllZero", "name": "zero-20"}
    assert "21 debugger rules (custom ones included); at most 20" in problems(
        rules=[*debugger, extra]
    )


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("TreeDepth", "'TreeDepth' is an XGBoost rule trainops does not evaluate yet"),
        ("vanishing_gradients", "debugger rules: VanishingGradient"),
        ({"rule": "SimilarAcrossRuns"}, "SimilarAcrossRuns needs other_trials"),
        (
            {"rule": "AllZero", "rule_parameters": {"treshold": 5}},
            "AllZero has no parameter 'treshold'; its parameters: collection_names",
        ),
        ({"rule": "AllZero", "rule_parameters": {"threshold": "lots"}}, "must be a number"),
        ({"rule": "AllZero", "rule_parameters": {"threshold": None}}, "must be a number"),
        ({"rule": "AllZero", "rule_parameters": {"threshold": "nan"}}, "must be a finite number"),
        ({"rule": "AllZero", "rule_parameters": {"threshold": -1}}, "of 0 or more"),
        (
            {"rule": "UnchangedTensor", "rule_parameters": {"num_steps": 2.5}},
            "UnchangedTensor.num_steps must be a whole number",
        ),
        (
            {"rule": "ExplodingTensor", "rule_parameters": {"only_nan": "maybe"}},
            "ExplodingTensor.only_nan must be true or false",
        ),
        (
            {"rule": "ExplodingTensor", "rule_parameters": {"tensor_regex": "(["}},
            "ExplodingTensor.tensor_regex is not a regular expression",
        ),
        (
            {"rule": "ExplodingTensor", "rule_parameters": {"tensor_regex": "a\x1b[2Jb"}},
            "without control characters",
        ),
        (
            {"rule": "ExplodingTensor", "rule_parameters": {"tensor_regex": "a" * 5000}},
            "must be 1-1024 characters",
        ),
        (
            {"rule": "AllZero", "rule_parameters": {"collection_names": "../etc,x"}},
            "is not a collection name",
        ),
        (
            {"rule": "AllZero", "rule_parameters": {"collection_names": ["x"] * 21}},
            "must be 1-20 collection names",
        ),
        (
            {"rule": "NLPSequenceRatio", "rule_parameters": {"token_values": "0,pad"}},
            "NLPSequenceRatio.token_values must be a number",
        ),
        (
            {"rule": "LossNotDecreasing", "rule_parameters": {"mode": "PREDICTISH"}},
            "LossNotDecreasing.mode must be one of TRAIN, EVAL, GLOBAL or null",
        ),
        ({"rule": "AllZero", "kind": "profiler"}, "kind: AllZero is a debugger rule"),
    ],
)
def test_bad_debugger_rules_are_refused_clearly(rule: Any, expected: str) -> None:
    assert expected in problems(rules=[rule])


def test_a_custom_rule_names_its_file_and_class() -> None:
    custom = {
        "name": "my-check",
        "source": "rules/check.py",
        "rule_to_invoke": "MyCheck",
        "rule_parameters": {"threshold": 0.5, "strict": True, "label": "x"},
        "actions": ["stop_training"],
    }
    job = spec(rules=[custom, "StepOutlier"])
    view = job.view()
    (rule,) = view.custom_rules
    assert (rule.kind, rule.rule, rule.source, rule.rule_to_invoke) == (
        "custom",
        "MyCheck",
        "rules/check.py",
        "MyCheck",
    )
    assert rule.rule_parameters == {"threshold": "0.5", "strict": "True", "label": "x"}
    assert view.debugger_rules == ()
    # A custom rule reads the tensors: the job gets a hook configuration at its defaults.
    assert view.debugger_hook_config is not None
    assert JobSpec(**job.model_dump(mode="json")).view() == view


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"name": "c", "source": "c.py"}, "a custom rule needs both source and rule_to_invoke"),
        ({"name": "c", "rule_to_invoke": "C"}, "a custom rule needs both source and"),
        ({"source": "c.py", "rule_to_invoke": "C"}, "a custom rule needs a name"),
        ({"name": "c", "source": "/etc/c.py", "rule_to_invoke": "C"}, "relative to source_dir"),
        ({"name": "c", "source": "../c.py", "rule_to_invoke": "C"}, "without '..'"),
        ({"name": "c", "source": "c.sh", "rule_to_invoke": "C"}, "must be a .py file"),
        ({"name": "c", "source": "c.py", "rule_to_invoke": "os.system"}, "a Python class name"),
        (
            {"name": "c", "source": "c.py", "rule_to_invoke": "C", "rule": "AllZero"},
            "leave rule out",
        ),
        (
            {"name": "c", "source": "c.py", "rule_to_invoke": "C", "rule_parameters": {"a-b": 1}},
            "'a-b' is not a parameter name",
        ),
        (
            {"name": "c", "source": "c.py", "rule_to_invoke": "C", "rule_parameters": {"x": [1]}},
            "x: must be a string, number or boolean",
        ),
        (
            {
                "name": "c",
                "source": "c.py",
                "rule_to_invoke": "C",
                "rule_parameters": {"base_trial": "s3://elsewhere"},
            },
            "'base_trial' is given by trainops",
        ),
        ({"name": "c"}, "rule: give a built-in rule, or source and rule_to_invoke"),
    ],
)
def test_bad_custom_rules_are_refused_clearly(rule: Any, expected: str) -> None:
    assert expected in problems(rules=[rule])


def test_a_custom_rule_cannot_go_without_the_hook() -> None:
    custom = {"name": "c", "source": "c.py", "rule_to_invoke": "C"}
    assert "debugger_hook_config: is false" in problems(rules=[custom], debugger_hook_config=False)


def _custom_job(tmp_path: Path, source_dir: str | None, write: bool) -> Path:
    code = tmp_path / "code"
    (code / "rules").mkdir(parents=True)
    (code / "train.py").write_text("pass\n")
    (tmp_path / "train.py").write_text("pass\n")
    if write:
        (code / "rules" / "check.py").write_text("class MyCheck: ...\n")
    lines = ["entry_point: train.py"]
    if source_dir is not None:
        lines.append(f"source_dir: {source_dir}")
    lines += [
        "rules:",
        "  - {name: my-check, source: rules/check.py, rule_to_invoke: MyCheck}",
    ]
    path = tmp_path / "job.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("source_dir", "write", "expected"),
    [
        ("code", False, "rules/check.py not found in"),
        (None, True, "a custom rule's file is packed with source_dir: give one"),
    ],
)
def test_a_custom_rules_file_must_be_in_the_packed_source(
    tmp_path: Path, source_dir: str | None, write: bool, expected: str
) -> None:
    path = _custom_job(tmp_path, source_dir, write)
    for load in (load_spec, lambda p: load_raw_spec(p).validate()):
        with pytest.raises(SpecError) as info:
            load(path)
        assert expected in str(info.value) and "rules.0.source" in str(info.value)
    assert not load_raw_spec(path).sendable


def test_a_custom_rules_file_in_source_dir_loads(tmp_path: Path) -> None:
    path = _custom_job(tmp_path, "code", True)
    assert load_raw_spec(path).sendable
    assert [r.kind for r in load_spec(path).rules] == ["custom"]


def test_a_local_hook_output_path_becomes_a_file_uri(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("pass\n")
    path = tmp_path / "job.yaml"
    path.write_text("entry_point: train.py\ndebugger_hook_config: {s3_output_path: dbg}\n")
    hook = load_spec(path).debugger_hook_config
    assert hook is not None and hook.s3_output_path == (tmp_path / "dbg").as_uri()
