"""Hyperparameters too big to pass to the script are refused at validation, not at exec (E2BIG).

The sizes are checked against the environment and arguments the agent really builds, and the
limits against a real ``execve`` of that environment.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from trainops import JobSpec, SpecError
from trainops.agent import (
    HostContext,
    HostTree,
    build_environment,
    encode_hyperparameters,
    input_data_config,
    resource_config,
    to_cmd_args,
)
from trainops.agent.contract._hyperparameters import decode_hyperparameters, split_hyperparameters
from trainops.protocol import ChannelSpec, HostResources
from trainops.spec import parse_spec
from trainops.spec._argsize import (
    MAX_ARG_STRLEN,
    TRAINING_ENV_RESERVE,
    argument_sizes,
    check_argument_size,
)

HOSTS = [f"algo-{i}" for i in range(1, 65)]
CHANNELS = [
    ChannelSpec(
        f"channel-{i:02d}-" + "c" * 50,
        f"s3://b/{i}/",
        None,
        "FullyReplicated",
        None,
        "File",
        None,
        "None",
        "None",
        "S3Prefix",
        (),
    )
    for i in range(20)
]


def _agent_view(tmp_path: Path, hps: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The script's argv and environment as the agent builds them (64 hosts, 20 channels)."""
    tree = HostTree(tmp_path / ("deep" * 20) / "root", "/opt/ml/checkpoints")
    tree.create([c.name for c in CHANNELS])
    tree.write_config("resourceconfig.json", resource_config("algo-1", HOSTS, "ml.c5.xlarge"))
    tree.write_config("inputdataconfig.json", input_data_config(CHANNELS))
    encoded = encode_hyperparameters(
        hps, program="train.py", submit_directory="s3://b/code.tar.gz", job_name="j", region="r"
    )
    values = decode_hyperparameters(encoded)
    host = HostContext("j", "algo-1", HOSTS, HostResources(), "train.py")
    env = build_environment(
        tree, host, values, spec_environment={}, base_env={"PATH": "/usr/bin"}, machine_gpus=0
    )
    user, _, _ = split_hyperparameters(values)
    return ["/bin/true", *to_cmd_args(user)], env


def _size(name: str, env: dict[str, str]) -> int:
    return len(name.encode()) + 1 + len(env[name].encode()) + 1


HPS: dict[str, Any] = {
    "lr": 0.001,
    "flag": True,
    "n": 3,
    "é-name": "naïve ünïcode",
    "layers": [64, 128, {"k": 1}],
    "opts": {"b": 2, "a": "x"},
    "x": "y" * 2000,
}


def test_estimates_match_the_agents_variables(tmp_path: Path) -> None:
    argv, env = _agent_view(tmp_path, HPS)
    sizes = argument_sizes(HPS)
    assert sizes["SM_HPS"] == _size("SM_HPS", env)
    assert sizes["SM_USER_ARGS"] == _size("SM_USER_ARGS", env)
    assert _size("SM_TRAINING_ENV", env) <= sizes["SM_TRAINING_ENV"]
    # The reserve covers the non-hyperparameter part even with 64 hosts, 20 channels, deep paths.
    assert sizes["SM_TRAINING_ENV"] - _size("SM_TRAINING_ENV", env) < TRAINING_ENV_RESERVE
    hp_vars = sum(_size(k, env) for k in env if k.startswith("SM_HP_"))
    args = sum(len(a.encode()) + 1 for a in argv[1:])
    assert hp_vars + args + _size("SM_HPS", env) + _size("SM_USER_ARGS", env) <= sizes["total"]


def _exec_errno(argv: list[str], env: dict[str, str]) -> int:
    try:
        subprocess.run(argv, env=env, check=True)
    except OSError as exc:
        return exc.errno
    return 0


def test_the_issues_case_is_refused_and_would_really_fail_at_exec(tmp_path: Path) -> None:
    hps = {f"h{i:02d}": "x" * 2490 for i in range(100)}
    with pytest.raises(SpecError) as info:
        JobSpec(entry_point="train.py", hyperparameters=hps)
    [(path, reason)] = info.value.problems
    assert path == "hyperparameters"
    assert "MAX_ARG_STRLEN" in reason and "E2BIG" in reason
    assert "100 hyperparameters of 249,000 bytes" in reason and "'h00' (2,490 bytes)" in reason
    assert _exec_errno(*_agent_view(tmp_path, hps)) == errno.E2BIG


def test_the_largest_accepted_hyperparameters_still_start(tmp_path: Path) -> None:
    hps: dict[str, Any] = {}
    for i in range(100):  # grow until the validator refuses, keeping the last accepted set
        candidate = {**hps, f"h{i:02d}": "x" * 2490}
        try:
            check_argument_size(candidate)
        except ValueError:
            break
        hps = candidate
    assert 30 < len(hps) < 100
    JobSpec(entry_point="train.py", hyperparameters=hps)
    argv, env = _agent_view(tmp_path, hps)
    assert max(_size(k, env) for k in env) < MAX_ARG_STRLEN
    assert _exec_errno(argv, {**os.environ, **env}) == 0


def test_a_small_arg_max_is_checked_with_the_inherited_environment() -> None:
    hps = {"a": "x" * 2000}
    check_argument_size(hps, arg_max=1024 * 1024, inherited={"PATH": "/usr/bin"})
    with pytest.raises(ValueError, match="over this machine's ARG_MAX of 200,000 bytes") as info:
        check_argument_size(hps, arg_max=200_000, inherited={"BIG": "v" * 50_000})
    assert "50,0" in str(info.value) and "'a' (2,000 bytes)" in str(info.value)


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "[1, .nan]", "{a: .inf}"])
def test_non_finite_hyperparameters_name_the_hyperparameter_and_line(value: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(f"entry_point: train.py\nhyperparameters:\n  lr: 1\n  a: {value}\n", "j.yaml")
    [(path, reason)] = info.value.problems
    assert path == "hyperparameters.a (line 4)"
    assert "inf or nan" in reason and "as a string" in reason


def test_a_missing_value_names_the_hyperparameter_and_line() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec("entry_point: train.py\nhyperparameters:\n  a:\n", "j.yaml")
    assert info.value.problems == [("hyperparameters.a (line 3)", "has no value")]


def test_inf_as_a_string_is_fine() -> None:
    spec = parse_spec("entry_point: train.py\nhyperparameters: {a: inf, b: '.nan'}\n")
    assert spec.hyperparameters == {"a": "inf", "b": ".nan"}
    assert JobSpec.model_validate_json(spec.model_dump_json()).hyperparameters == {
        "a": "inf",
        "b": ".nan",
    }


@pytest.mark.parametrize(
    ("hyperparameters", "path", "fragment"),
    [
        ({"a=b": 1}, "hyperparameters", "must not contain '='"),
        ({"a\0b": 1}, "hyperparameters", "must not contain '=', NUL"),
        ({"a": "x\0y"}, "hyperparameters.a", "NUL character"),
        ({"a": {"k": "x\0y"}}, "hyperparameters.a", "NUL character"),
        ({"a": "\ud800"}, "hyperparameters.a", "unpaired surrogate"),
    ],
)
def test_what_no_process_can_receive_is_refused(
    tmp_path: Path, hyperparameters: dict[str, Any], path: str, fragment: str
) -> None:
    with pytest.raises(SpecError) as info:
        JobSpec(entry_point="train.py", hyperparameters=hyperparameters)
    [(where, reason)] = info.value.problems
    assert where == path and fragment in reason
    if not isinstance(next(iter(hyperparameters.values())), list):
        with pytest.raises((ValueError, UnicodeEncodeError)):  # what exec would have done
            subprocess.run(
                *_agent_view(tmp_path, hyperparameters)[:1],
                env=_agent_view(tmp_path / "again", hyperparameters)[1],
                check=True,
            )


def test_environment_values_with_nul_are_refused() -> None:
    with pytest.raises(SpecError, match="NUL character"):
        JobSpec(entry_point="train.py", environment={"A": "x\0"})
