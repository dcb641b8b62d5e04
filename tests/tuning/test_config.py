"""A tuning job's config: YAML loading with lines, defaults, and every SageMaker refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tuning.conftest import fields, make_config
from trainops import SpecError
from trainops.tuning import EarlyStoppingType, Strategy, load_tuning_config


def _problems(**changes: Any) -> str:
    with pytest.raises(SpecError) as caught:
        make_config(**changes)
    return str(caught.value)


def _job(**changes: Any) -> dict[str, Any]:
    job: dict[str, Any] = fields()["training_job"]
    job.update(changes)
    return job


def test_a_valid_config_and_its_defaults() -> None:
    config = make_config(strategy=None, random_seed=None)
    assert config.strategy is Strategy.BAYESIAN  # the SDK's default
    assert config.training_job_early_stopping_type is EarlyStoppingType.OFF
    assert config.max_training_jobs == 20
    assert config.static_hyperparameters == {"epochs": 9, "seed": 1}
    assert config.hyperband_resource() is None


def test_a_tuned_name_overrides_the_static_one() -> None:
    config = make_config(training_job=_job(hyperparameters={"epochs": 9, "lr": 0.5}))
    assert config.static_hyperparameters == {"epochs": 9}


REFUSALS = [
    ({"tuning_job_name": "x" * 33}, "tuning_job_name", "1-32 letters"),
    ({"tuning_job_name": "bad_name"}, "tuning_job_name", "1-32 letters"),
    ({"objective": {"metric_name": "acc", "type": "Maximize"}}, "objective.metric_name",
     "'acc' has no metric definition (defined: loss); add one"),
    ({"objective": {"metric_name": "loss", "type": "Lowest"}}, "objective.type", "Maximize"),
    ({"hyperparameter_ranges": {f"p{i}": [1, 2] for i in range(31)}}, "hyperparameter_ranges",
     "31 ranges; at most 30"),
    ({"hyperparameter_ranges": {}}, "hyperparameter_ranges", "at least 1"),
    ({"hyperparameter_ranges": {"sagemaker_program": ["a"]}}, "hyperparameter_ranges",
     "'sagemaker_program' is reserved"),
    ({"hyperparameter_ranges": {"_tuning_objective_metric": ["a"]}}, "hyperparameter_ranges",
     "reserved"),
    ({"hyperparameter_ranges": {"a=b": ["a"]}}, "hyperparameter_ranges", "must not contain '='"),
    ({"strategy": "Grid"}, "hyperparameter_ranges.lr", "Grid takes Categorical ranges only"),
    ({"strategy": "Grid", "hyperparameter_ranges": {"o": ["a", "b"]}},
     "resource_limits.max_number_of_training_jobs", "Grid runs every combination (2)"),
    ({"strategy": "Annealing"}, "strategy", "Bayesian"),
    ({"strategy": "Hyperband", "training_job_early_stopping_type": "Auto"},
     "training_job_early_stopping_type", "SageMaker refuses Auto with Hyperband"),
    ({"strategy": "Hyperband", "training_job": _job(hyperparameters={})},
     "strategy_config.hyperband_strategy_config.max_resource", "Hyperband needs it"),
    ({"strategy": "Hyperband", "training_job": _job(hyperparameters={"epochs": "many"})},
     "training_job.hyperparameters.epochs", "resource must be 1-20000"),
    ({"strategy": "Hyperband", "hyperparameter_ranges": {"epochs": [1, 2]}},
     "hyperparameter_ranges.epochs", "Hyperband's resource cannot be tuned"),
    ({"strategy": "Hyperband", "strategy_config": {"hyperband_strategy_config":
      {"min_resource": 10}}}, "min_resource", "10 is above the max_resource 9"),
    ({"strategy": "Hyperband", "strategy_config": {"hyperband_strategy_config":
      {"max_resource": 20001}}}, "max_resource", "less than or equal to 20000"),
    ({"strategy_config": {}}, "strategy_config", "only Hyperband takes one, not Random"),
    ({"resource_limits": {"max_parallel_training_jobs": 2}},
     "resource_limits.max_number_of_training_jobs", "required (except with Grid)"),
    ({"resource_limits": {"max_number_of_training_jobs": 0, "max_parallel_training_jobs": 1}},
     "max_number_of_training_jobs", "greater than or equal to 1"),
    ({"resource_limits": {"max_number_of_training_jobs": 10001, "max_parallel_training_jobs": 1}},
     "max_number_of_training_jobs", "the Random strategy runs at most 10000"),
    ({"strategy": "Bayesian", "resource_limits": {"max_number_of_training_jobs": 751,
      "max_parallel_training_jobs": 1}}, "max_number_of_training_jobs", "at most 750"),
    ({"resource_limits": {"max_number_of_training_jobs": 5}},
     "max_parallel_training_jobs", "Field required"),
    ({"resource_limits": {"max_number_of_training_jobs": 5, "max_parallel_training_jobs": 101}},
     "max_parallel_training_jobs", "less than or equal to 100"),
    ({"resource_limits": {"max_number_of_training_jobs": 5, "max_parallel_training_jobs": 1,
      "max_runtime_in_seconds": 119}}, "max_runtime_in_seconds", "greater than or equal to 120"),
    ({"completion_criteria": {"best_objective_not_improving":
      {"max_number_of_training_jobs_not_improving": 2}}}, "not_improving",
     "greater than or equal to 3"),
    ({"completion_criteria": {"convergence_detected": {"complete_on_convergence": "Maybe"}}},
     "complete_on_convergence", "Enabled"),
    ({"warm_start_config": {"parents": [f"p{i}" for i in range(6)],
      "warm_start_type": "TransferLearning"}}, "warm_start_config.parents", "at most 5"),
    ({"warm_start_config": {"parents": ["a", "a"], "warm_start_type": "TransferLearning"}},
     "warm_start_config.parents", "repeated: a"),
    ({"warm_start_config": {"parents": ["a"], "warm_start_type": "Recursive"}},
     "warm_start_type", "IdenticalDataAndAlgorithm"),
    ({"training_job": _job(metric_definitions=[{"name": f"m{i}", "regex": "x=(.*)"}
      for i in range(20)] + [{"name": "loss", "regex": "l=(.*)"}])},
     "training_job.metric_definitions", "21 metrics; a tuning job's training job has at most 20"),
    ({"training_job": _job(hyperparameters={f"h{i}": i for i in range(98)})},
     "training_job.hyperparameters", "101 hyperparameters (tuned and static); at most 100"),
    ({"training_job": _job(instance_type="ml.nope")}, "training_job.instance_type", "ml.nope"),
    ({"random_seed": -1}, "random_seed", "greater than or equal to 0"),
    ({"hyperparameter_ranges": {"lr": {"type": "Continuous", "min_value": 0, "max_value": 1,
      "scaling_type": "Logarithmic"}}}, "hyperparameter_ranges.lr", "Logarithmic scaling"),
    ({"surprise": 1}, "surprise", "unknown field"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "field", "reason"), REFUSALS)
def test_refusals_name_the_field_and_the_fix(
    changes: dict[str, Any], field: str, reason: str
) -> None:
    message = _problems(**changes)
    assert field in message
    assert reason in message


def test_grid_may_omit_the_job_count_or_give_the_exact_one() -> None:
    ranges = {"opt": ["sgd", "adam"], "bs": [16, 32, 64]}
    limits = {"max_parallel_training_jobs": 2}
    grid = make_config(strategy="Grid", hyperparameter_ranges=ranges, resource_limits=limits)
    assert grid.max_training_jobs == 6
    exact = {**limits, "max_number_of_training_jobs": 6}
    assert make_config(strategy="Grid", hyperparameter_ranges=ranges, resource_limits=exact)


def test_hyperband_infers_its_resource_from_epochs_like_names() -> None:
    for name in ("epochs", "numepochs", "n-epochs", "n_epochs", "num_epochs"):
        config = make_config(strategy="Hyperband", training_job=_job(hyperparameters={name: 27}))
        resource = config.hyperband_resource()
        assert resource is not None
        assert (resource.hyperparameter, resource.min_resource, resource.max_resource) == (
            name, 1, 27)  # fmt: skip
    named = make_config(
        strategy="Hyperband",
        training_job=_job(hyperparameters={"steps": 3}),
        strategy_config={"hyperband_strategy_config": {"min_resource": 2, "max_resource": 50,
                                                       "resource_hyperparameter": "steps"}},
    )  # fmt: skip
    assert named.static_hyperparameters["steps"] == 50  # trials run to the max resource


YAML = """\
tuning_job_name: yaml-tune
training_job: job.yaml
strategy: hyperband
training_job_early_stopping_type: Off
objective: {metric_name: loss, type: Minimize}
hyperparameter_ranges:
  lr: {type: Continuous, min_value: 1e-4, max_value: 0.1, scaling_type: Logarithmic}
  optimizer: [sgd, adam]
resource_limits: {max_number_of_training_jobs: 12, max_parallel_training_jobs: 2}
"""
JOB = """\
entry_point: train.py
hyperparameters: {epochs: 9}
metric_definitions: [{name: loss, regex: 'loss=([0-9.]+)'}]
"""


def _files(tmp_path: Path, tune: str, job: str = JOB) -> Path:
    (tmp_path / "train.py").write_text("print('loss=1')\n")
    (tmp_path / "job.yaml").write_text(job)
    (tmp_path / "tune.yaml").write_text(tune)
    return tmp_path / "tune.yaml"


def test_yaml_with_a_job_file_and_yaml_off(tmp_path: Path) -> None:
    config = load_tuning_config(_files(tmp_path, YAML))
    assert config.strategy is Strategy.HYPERBAND
    assert config.training_job_early_stopping_type is EarlyStoppingType.OFF  # YAML's Off is false
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "train.py").write_text("")
    (sub / "job.yaml").write_text("source_dir: .\n" + JOB)
    nested = load_tuning_config(_files(tmp_path, YAML.replace("job.yaml", "sub/job.yaml")))
    assert nested.training_job.source_dir == str(sub)  # against the job file's folder


def test_an_inline_job_resolves_its_paths_against_the_tuning_file(tmp_path: Path) -> None:
    inline = YAML.replace(
        "training_job: job.yaml", "training_job:\n" + _indent("source_dir: .\n" + JOB)
    )
    config = load_tuning_config(_files(tmp_path, inline))
    assert config.training_job.source_dir == str(tmp_path)


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())


def test_yaml_refusals_carry_the_line(tmp_path: Path) -> None:
    bad = YAML.replace("type: Minimize", "type: Minimise").replace(
        "Off", "Auto"
    )  # two problems, each at its line
    with pytest.raises(SpecError) as caught:
        load_tuning_config(_files(tmp_path, bad))
    message = str(caught.value)
    assert "objective.type (line 5)" in message
    bad = YAML.replace("metric_name: loss", "metric_name: acc")
    with pytest.raises(SpecError, match=r"objective.metric_name \(line 5\): 'acc' has no metric"):
        load_tuning_config(_files(tmp_path, bad))
    bad = YAML.replace(
        "training_job_early_stopping_type: Off", "training_job_early_stopping_type: Auto"
    )
    with pytest.raises(SpecError, match=r"training_job_early_stopping_type \(line 4\)"):
        load_tuning_config(_files(tmp_path, bad))


def test_an_inline_job_problem_carries_its_line(tmp_path: Path) -> None:
    inline = YAML.replace("training_job: job.yaml", "training_job:\n" + _indent(JOB))
    inline = inline.replace("epochs: 9", "sagemaker_program: 9")
    with pytest.raises(SpecError, match=r"training_job.hyperparameters \(line 4\)"):
        load_tuning_config(_files(tmp_path, inline))


def test_a_missing_job_file_or_script_is_refused(tmp_path: Path) -> None:
    path = _files(tmp_path, YAML.replace("job.yaml", "nojob.yaml"))
    with pytest.raises(SpecError, match=r"training_job \(line 2\): no job spec file .*nojob"):
        load_tuning_config(path)
    path = _files(tmp_path, YAML)
    (tmp_path / "train.py").unlink()
    with pytest.raises(SpecError, match=r"train\.py not found"):
        load_tuning_config(path)
    inline = YAML.replace("training_job: job.yaml", "training_job:\n" + _indent(JOB))
    path = _files(tmp_path, inline)
    (tmp_path / "train.py").unlink()
    with pytest.raises(SpecError, match=r"training_job\.entry_point \(line 3\): .*train\.py"):
        load_tuning_config(path)  # the inline job's script: said at its line in the tuning file


def test_refusals_are_headed_invalid_tuning_job_with_the_file(tmp_path: Path) -> None:
    cases = {
        "a: [": "<tuning job>: line 1, column 5: not valid YAML",
        "[1, 2]": "a tuning job must be a mapping",
        YAML.replace("type: Minimize", "type: Lowest"): "objective.type (line 5)",
        YAML.replace("job.yaml", "nojob.yaml"): "training_job (line 2): no job spec file",
        YAML.replace("job.yaml", '"a\\0b"'): "no job spec file '" + str(tmp_path / "a\\x00b'"),
    }
    for text, problem in cases.items():
        path = _files(tmp_path, text)
        with pytest.raises(SpecError) as caught:
            load_tuning_config(path)
        head, *problems = str(caught.value).splitlines()
        assert head == f"invalid tuning job in {path}:"
        assert any(problem in line for line in problems), (text, problems)
    with pytest.raises(SpecError, match=r"^invalid tuning job:\n  objective"):
        make_config(objective={"metric_name": "loss", "type": "Lowest"})  # from Python: no file


def test_a_job_file_s_refusals_are_the_tuning_job_s_at_their_line_in_that_file(
    tmp_path: Path,
) -> None:
    cases = {
        JOB.replace("epochs: 9", "sagemaker_program: 9"):
            ["training_job.hyperparameters (job.yaml line 2): "],
        JOB + "instance_count: 0\nbogus: 1\n": [
            "training_job.instance_count (job.yaml line 4): Input should be greater than",
            "training_job.bogus (job.yaml line 5): unknown field",
        ],
        "entry_point: train.py\n  x: [\n":
            ["training_job (line 2): job.yaml: line 2, column 4: not valid YAML"],
        "- a list\n": ["training_job (line 2): job.yaml: the spec must be a mapping"],
        JOB.replace("train.py", "gone.py"): ["training_job.entry_point (job.yaml): ", "gone.py"],
    }  # fmt: skip
    for job, expected in cases.items():
        path = _files(tmp_path, YAML, job)
        with pytest.raises(SpecError) as caught:
            load_tuning_config(path)
        head, *problems = str(caught.value).splitlines()
        assert head == f"invalid tuning job in {path}:", job
        for part in expected:
            assert any(part in line for line in problems), (job, problems)


def test_a_hostile_job_file_name_reaches_the_message_escaped(tmp_path: Path) -> None:
    (tmp_path / "j\x1b[2Job.yaml").write_text("entry_point: train.py\ninstance_count: 0\n")
    path = _files(tmp_path, YAML.replace("job.yaml", '"j\\e[2Job.yaml"'))
    with pytest.raises(SpecError) as caught:
        load_tuning_config(path)
    message = str(caught.value)
    assert "\x1b" not in message
    assert "training_job.instance_count (j\\x1b[2Job.yaml line 2)" in message


NESTED = """\
tuning_job_name: nested
training_job: job.yaml
objective: {metric_name: loss, type: Minimize}
hyperparameter_ranges:
  lr:
    type: Continuous
    min_value: 0
    max_value: 0.1
    scaling_type: Logarithmic
  momentum:
    type: Continuous
    min_value: 0.5
    max_value: 1.5
    scaling_type: ReverseLogarithmic
  layers: {type: Integer, min_value: 1, max_value: 2.5}
  optimizer:
    type: Categorical
    values: [sgd, adam]
    scaling_type: Linear
resource_limits: {max_number_of_training_jobs: 12, max_parallel_training_jobs: 2}
"""


def test_a_nested_range_problem_carries_the_line_of_its_field(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        load_tuning_config(_files(tmp_path, NESTED))
    problems = str(caught.value).splitlines()[1:]
    assert [line.partition(":")[0].strip() for line in problems] == [
        "hyperparameter_ranges.lr.min_value (line 7)",
        "hyperparameter_ranges.momentum.max_value (line 13)",
        "hyperparameter_ranges.layers.max_value (line 15)",
        "hyperparameter_ranges.optimizer.scaling_type (line 19)",
    ]


def test_a_device_or_directory_is_refused_not_read(tmp_path: Path) -> None:
    path = _files(tmp_path, YAML.replace("job.yaml", "/dev/zero"))
    with pytest.raises(SpecError, match=r"training_job \(line 2\): /dev/zero is not a regular"):
        load_tuning_config(path)  # reading /dev/zero would never end
    with pytest.raises(SpecError, match="is not a regular file"):
        load_tuning_config(tmp_path)


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", "a: [", "training_job: 3\n", "!!python/object:os.system {}\n", "\x00", "{1: 2}"],
)
def test_hostile_yaml_is_a_clear_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(SpecError):
        load_tuning_config(_files(tmp_path, text))


@pytest.mark.parametrize(
    ("ranges", "field", "reason"),
    [
        ({"a\ud800": [1, 2]}, "hyperparameter_ranges", "unpaired surrogates"),
        ({"a": ["x", "\x00"]}, "hyperparameter_ranges.a", "NUL character"),
        ({"a": ["\ud800"]}, "hyperparameter_ranges.a", "unpaired surrogate"),
        ({"a": ["y", "x" * 2501]}, "hyperparameter_ranges.a", "at most 2500"),
    ],
)
def test_hostile_tuned_names_and_values_are_refused(
    ranges: dict[str, Any], field: str, reason: str
) -> None:
    message = _problems(hyperparameter_ranges=ranges)
    assert f"{field}:" in message
    assert reason in message


def test_yaml_booleans_in_a_categorical_range_are_passed_as_true_and_false() -> None:
    config = make_config(hyperparameter_ranges={"flag": [True, False]})
    assert config.hyperparameter_ranges["flag"].values == ["true", "false"]


def test_the_digits_example_is_a_valid_hyperband_tuning_job() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "digits" / "tune.yaml"
    config = load_tuning_config(example)
    resource = config.hyperband_resource()
    assert resource is not None and (resource.hyperparameter, resource.max_resource) == (
        "epochs",
        9,
    )
    assert sorted(config.hyperparameter_ranges) == ["batch-size", "lr", "optimizer"]
