"""SaveConfig, ReductionConfig, collections and the hook's JSON, with smdebug's semantics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainops.debugger import modes
from trainops.debugger.config import (
    Collection,
    CollectionManager,
    HookConfig,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
    load_hook_config,
)
from trainops.debugger.exceptions import DebugConfigError


def saved(config: SaveConfig, mode: modes.ModeKeys, upto: int) -> list[int]:
    return [step for step in range(upto) if config.should_save_step(mode, step)]


def test_default_saves_every_500_steps() -> None:
    assert saved(SaveConfig(), modes.TRAIN, 1501) == [0, 500, 1000, 1500]


def test_start_step_is_smdebugs_example() -> None:
    # SMD docs: save_interval=100, start_step=150 saves 200, 300, ...
    assert saved(SaveConfig(save_interval=100, start_step=150), modes.TRAIN, 450) == [200, 300, 400]


def test_end_step_is_exclusive_and_save_steps_are_a_union() -> None:
    config = SaveConfig(save_interval=10, end_step=30, save_steps=[7, 45])
    assert saved(config, modes.GLOBAL, 50) == [0, 7, 10, 20, 45]


def test_per_mode_configs_override_the_default() -> None:
    config = SaveConfig(
        mode_save_configs={modes.EVAL: SaveConfigMode(save_interval=1)}, save_interval=5
    )
    assert saved(config, modes.EVAL, 4) == [0, 1, 2, 3]
    assert saved(config, modes.TRAIN, 11) == [0, 5, 10]
    assert SaveConfig.from_dict(config.to_json_dict()) == config


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"save_interval": 0}, "save_interval must be at least 1"),
        ({"save_interval": "ten"}, "save_interval must be an integer"),
        ({"start_step": -1}, "start_step must be at least 0"),
        ({"save_steps": [1, "x"]}, "save_steps must be an integer"),
    ],
)
def test_bad_save_configs_say_what(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SaveConfigMode(**kwargs)  # type: ignore[arg-type]


def test_reduction_config_round_trips_smdebugs_json() -> None:
    config = ReductionConfig.from_dict(
        {"reductions": "min,abs_max,l1_norm,abs_l2_norm", "save_raw_tensor": "True"}
    )
    assert config.reductions == ("min",) and config.abs_reductions == ("max",)
    assert config.norms == ("l1",) and config.abs_norms == ("l2",)
    assert config.save_raw_tensor is True
    assert ReductionConfig.from_dict(config.to_json_dict()) == config
    assert ("max", True) in config.reduction_list


def test_reduction_config_refuses_unknown_names() -> None:
    with pytest.raises(ValueError, match="'median' is not one of"):
        ReductionConfig.from_dict({"reductions": "median"})
    with pytest.raises(ValueError, match="norms: 'l3'"):
        ReductionConfig(norms=["l3"])


def test_collections_match_by_name_and_regex() -> None:
    weights = Collection("weights", include_regex=[r".*\.weight$"])
    weights.add_tensor_name("special")
    assert weights.matches("fc1.weight") and weights.matches("special")
    assert not weights.matches("fc1.bias")
    manager = CollectionManager([weights], num_workers=2)
    back = CollectionManager.from_dict(json.loads(json.dumps(manager.to_json_dict())))
    assert back.num_workers == 2 and back.get("weights", create=False) == weights
    with pytest.raises(ValueError, match="not a valid regex"):
        Collection("bad", include_regex=["("])


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(data))
    return path


SAMPLE = {
    "LocalPath": "/opt/ml/output/tensors",
    "S3OutputPath": "s3://bucket/job/debug-output",
    "HookParameters": {"save_interval": "100", "eval.save_interval": "1", "reductions": "max"},
    "CollectionConfigurations": [
        {"CollectionName": "weights", "CollectionParameters": {"save_interval": "50"}},
        {
            "CollectionName": "relu",
            "CollectionParameters": {"include_regex": ".*relu_output", "save_histogram": "false"},
        },
        {"CollectionName": "losses"},
    ],
}


def test_hook_config_reads_sagemakers_shape(tmp_path: Path) -> None:
    config = load_hook_config(write(tmp_path, SAMPLE))
    assert config.s3_output_path == "s3://bucket/job/debug-output"
    assert saved(config.save_config(), modes.TRAIN, 201) == [0, 100, 200]
    assert saved(config.save_config(), modes.EVAL, 3) == [0, 1, 2]
    assert config.reduction_config() == ReductionConfig(reductions=["max"])
    weights, relu, losses = config.collections()
    assert saved(weights.save_config, modes.TRAIN, 101) == [0, 50, 100]  # type: ignore[arg-type]
    # as smdebug: the collection's own save_interval wins over the hook's eval.save_interval
    assert saved(weights.save_config, modes.EVAL, 101) == [0, 50, 100]  # type: ignore[arg-type]
    assert saved(relu.save_config, modes.EVAL, 3) == [0, 1, 2]  # type: ignore[arg-type]
    assert relu.matches("layer1.relu_output") and relu.save_histogram is False
    assert losses.name == "losses"
    assert HookConfig.from_dict(json.loads(config.to_json())) == config


def test_hook_config_reads_the_environment_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(write(tmp_path, SAMPLE)))
    assert load_hook_config().local_path == "/opt/ml/output/tensors"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must be a JSON object"),
        ({"HookParameters": {"save_interval": "x"}}, "save_interval must be an integer"),
        ({"HookParameters": {"reductions": "nope"}}, "reductions: 'nope'"),
        ({"HookParameters": ["save_interval"]}, "HookParameters must be an object"),
        ({"CollectionConfigurations": [{"CollectionName": 3}]}, r"\[0\].CollectionName"),
        (
            {
                "CollectionConfigurations": [
                    {"CollectionName": "w", "CollectionParameters": {"include_regex": "("}}
                ]
            },
            "collection 'w': include_regex",
        ),
        ({"CollectionConfigurations": [{"CollectionName": "c"}] * 101}, "at most 100"),
    ],
)
def test_bad_hook_configs_get_one_line_naming_the_key(
    tmp_path: Path, data: object, message: str
) -> None:
    with pytest.raises(DebugConfigError, match=message) as caught:
        load_hook_config(write(tmp_path, data))
    assert "\n" not in str(caught.value) and "debughookconfig.json" in str(caught.value)


def test_hook_config_refuses_a_huge_or_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "debughookconfig.json"
    path.write_bytes(b"{" * 2_000_000)
    with pytest.raises(DebugConfigError, match="larger than"):
        load_hook_config(path)
    path.write_bytes(b"[" * 100_000)
    with pytest.raises(DebugConfigError, match="not valid JSON"):
        load_hook_config(path)
    with pytest.raises(DebugConfigError, match="cannot read"):
        load_hook_config(tmp_path / "missing.json")
