"""debugger_hook_config: SageMaker's names, string parameters, rule collections, clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from trainops import JobSpec, SpecError
from trainops.debugger.config import Collection
from trainops.spec import parse_spec


def spec(**fields: Any) -> JobSpec:
    return JobSpec(entry_point="train.py", **fields)


def problems(**fields: Any) -> str:
    with pytest.raises(SpecError) as info:
        spec(**fields)
    return str(info.value)


def test_no_hook_config_by_default_and_the_defaults_when_given() -> None:
    assert spec().view().debugger_hook_config is None
    hook = spec(debugger_hook_config={}).view().debugger_hook_config
    assert hook is not None
    assert hook.container_local_output_path == "/opt/ml/output/tensors"
    assert hook.s3_output_path is None and hook.collection_configs == ()
    assert hook.output_prefix("s3://b/out/job-1", "job-1") == "s3://b/out/job-1/debug-output"
    assert spec(debugger_hook_config=True).view().debugger_hook_config == hook
    assert spec(debugger_hook_config=False).view().debugger_hook_config is None


def test_parameters_become_the_apis_strings() -> None:
    config = {
        "hook_parameters": {
            "save_interval": 100,
            "train.save_interval": "10",
            "eval.save_steps": [1, 2, 3],
            "start_step": 5,
            "end_step": "50",
            "include_regex": "fc.*,conv1.*",
            "reductions": "min, abs_l2_norm",
            "save_raw_tensor": True,
            "include_workers": "ALL",
        },
        "collection_configs": [
            "weights",
            {"name": "gradients", "parameters": {"save_histogram": "False"}},
        ],
    }
    hook = spec(debugger_hook_config=config).view().debugger_hook_config
    assert hook is not None
    assert dict(hook.hook_parameters) == {
        "save_interval": "100",
        "train.save_interval": "10",
        "eval.save_steps": "1,2,3",
        "start_step": "5",
        "end_step": "50",
        "include_regex": "fc.*,conv1.*",
        "reductions": "min,abs_l2_norm",
        "save_raw_tensor": "true",
        "include_workers": "all",
    }
    assert [(c.name, dict(c.parameters)) for c in hook.collection_configs] == [
        ("weights", {}),
        ("gradients", {"save_histogram": "false"}),
    ]


def test_debugger_rules_add_their_collections_and_the_jobs_own_win() -> None:
    own = {"collection_configs": {"gradients": {"save_interval": "10"}}}
    job = spec(rules=["VanishingGradient", "DeadRelu"], debugger_hook_config=own).view()
    hook = job.debugger_hook_config
    assert hook is not None
    assert [(c.name, dict(c.parameters)) for c in hook.collection_configs] == [
        ("relu_output", {"include_regex": ".*relu_output", "save_interval": "500"}),
        ("gradients", {"save_interval": "10"}),
    ]
    alone = spec(rules=["loss_not_decreasing"]).view().debugger_hook_config
    assert alone is not None
    assert [c.name for c in alone.collection_configs] == ["losses"]
    # No collection of its own: the hook configuration still exists, at its defaults.
    bare = spec(rules=["ExplodingTensor"]).view().debugger_hook_config
    assert bare is not None and bare.collection_configs == ()


def test_the_describe_shape_is_sagemakers() -> None:
    hook = spec(rules=["VanishingGradient"]).view().debugger_hook_config
    assert hook is not None
    assert hook.api_shape("/opt/ml/output/tensors", "s3://b/j/debug-output") == {
        "LocalPath": "/opt/ml/output/tensors",
        "S3OutputPath": "s3://b/j/debug-output",
        "HookParameters": {},
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
        ],
    }


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"hook_parameters": {"save_intervall": 5}}, "'save_intervall' is not one of the hook"),
        ({"hook_parameters": {"save_interval": 0}}, "save_interval: must be a whole number of 1"),
        ({"hook_parameters": {"save_interval": "ten"}}, "save_interval: must be a whole number"),
        ({"hook_parameters": {"train.include_regex": "x"}}, "'train.include_regex' is not one"),
        ({"hook_parameters": {"start_step": -1}}, "start_step: must be a whole number of 0"),
        ({"hook_parameters": {"save_steps": "1,x"}}, "save_steps: must be a whole number"),
        ({"hook_parameters": {"reductions": "median"}}, "'median' is not a reduction"),
        ({"hook_parameters": {"include_regex": "a,(b"}}, "'(b' is not a regular expression"),
        ({"hook_parameters": {"include_regex": "a, (a+)+$"}}, "a repeat inside a repeat"),
        ({"hook_parameters": {"include_regex": ".*a.*a.*a.*b"}}, "4 unbounded repeats, at most 2"),
        (
            {"collection_configs": {"w": {"include_regex": "(x|xy)*z"}}},
            "collection_configs.0.parameters.include_regex: include_regex: '(x|xy)*z': a repeat",
        ),
        ({"hook_parameters": {"include_regex": ",".join("a" * 101)}}, "101 patterns, at most 100"),
        (
            {"hook_parameters": {"include_regex": "(" * 499 + "a" + ")" * 499}},
            "groups nested too deeply",
        ),
        ({"hook_parameters": {"include_workers": "some"}}, "must be one or all"),
        ({"hook_parameters": {"save_all": "maybe"}}, "save_all: must be true or false"),
        ({"hook_parameters": {"tensorboard_dir": "/etc"}}, "must be a directory under /opt/ml/"),
        ({"hook_parameters": {"include_regex": "a\x1b[31m"}}, "no control characters"),
        ({"hook_parameters": {"include_regex": {"a": 1}}}, "must be a string"),
        (
            {"hook_parameters": {f"train.save_steps_{i}": 1 for i in range(21)}},
            "21 hook parameters; at most 20",
        ),
        ({"hook_parameters": {"save_steps": ",".join(["1"] * 1001)}}, "at most 1024 characters"),
        ({"collection_configs": [{"name": "../x"}]}, "is not a collection name"),
        ({"collection_configs": ["w", "w"]}, "collection names must be unique; repeated: w"),
        ({"collection_configs": [f"c{i}" for i in range(21)]}, "21 collections; at most 20"),
        (
            {"collection_configs": {"w": {"save_all": "true"}}},
            "'save_all' is not one of the collection parameters",
        ),
        ({"container_local_output_path": "/tmp/t"}, "must be a directory under /opt/ml/"),
        ({"container_local_output_path": "/opt/ml/../etc/x"}, "must be a directory under"),
        ({"s3_output_path": "ftp://x/y"}, "ftp"),
    ],
)
def test_bad_hook_configs_are_refused_clearly(config: dict[str, Any], expected: str) -> None:
    assert expected in problems(debugger_hook_config=config)


def test_rules_that_need_the_hook_cannot_go_without_it() -> None:
    message = problems(rules=["VanishingGradient"], debugger_hook_config=False)
    assert "debugger_hook_config: is false, but debugger rules read the tensors" in message
    many = {"collection_configs": [f"c{i}" for i in range(20)]}
    assert "21 collections with those the debugger rules save" in problems(
        rules=["VanishingGradient"], debugger_hook_config=many
    )


def test_a_yaml_refusal_names_the_field_and_its_line() -> None:
    text = (
        "entry_point: train.py\n"
        "debugger_hook_config:\n"
        "  hook_parameters:\n"
        "    save_interval: zero\n"
    )
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    text = str(info.value)
    expected = "debugger_hook_config.hook_parameters.save_interval (line 4): save_interval: must"
    assert expected in text, text


@pytest.mark.parametrize(
    "pattern",
    [
        ".*relu_output",
        "fc.*weight",
        "(a+)+$",
        ".*a.*a.*a.*b",
        "(x|xy)*z",
        "a+b{17}c+",
        "x" * 1001,
    ],
)
def test_the_spec_refuses_exactly_the_patterns_the_trial_reader_refuses(pattern: str) -> None:
    """A pattern the control plane's trial reader refuses in the job's collections file would
    leave the job's rules seeing nothing: the spec refuses it at submit instead."""
    try:
        Collection.from_dict({"name": "c", "include_regex": [pattern]}, untrusted=True)
        reader_refuses = False
    except ValueError:
        reader_refuses = True
    try:
        spec(debugger_hook_config={"collection_configs": {"c": {"include_regex": pattern}}})
        spec_refuses = False
    except SpecError:
        spec_refuses = True
    assert spec_refuses == reader_refuses
