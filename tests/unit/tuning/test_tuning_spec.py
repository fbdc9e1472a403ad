"""The tuning section: strict, every problem names its field, cross-checked against the training spec."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.tuning import TuningSpec, load_tuning_spec, tuning_problems

OBJECTIVE = {"metric": "validation:accuracy", "type": "Maximize"}
TRAINING: dict[str, Any] = {
    "name": "unit",
    "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
    "source": {"entry_point": "train.py", "source_dir": "s3://bucket/code/sourcedir.tar.gz"},
    "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
    "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
    "output": {"s3_path": "s3://bucket/models"},
    "metric_definitions": [{"name": "validation:accuracy", "regex": "acc=([0-9.]+)"}],
}


def tuning(**over: Any) -> dict[str, Any]:
    return {
        "objective": OBJECTIVE,
        "max_jobs": 4,
        "max_parallel_jobs": 2,
        "ranges": {"lr": {"type": "continuous", "min_value": 0.001, "max_value": 0.1}},
        **over,
    }


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecValidationError) as err:
        load_tuning_spec(data)
    return [str(p) for p in err.value.problems]


def test_a_full_section_loads_from_yaml() -> None:
    spec = load_tuning_spec(
        """
strategy: Random
objective: {metric: "validation:accuracy", type: Minimize}
max_jobs: 6
max_parallel_jobs: 3
early_stopping: Auto
random_seed: 3
ranges:
  lr: {type: continuous, min_value: 0.0001, max_value: 0.1, scaling_type: Logarithmic}
  layers: {type: integer, min_value: 1, max_value: 4}
  optimizer: {type: categorical, values: [sgd, adam]}
"""
    )
    assert isinstance(spec, TuningSpec)
    assert spec.strategy == "Random" and spec.total_jobs == 6 and spec.objective.type == "Minimize"
    assert list(spec.ranges) == ["lr", "layers", "optimizer"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (tuning(ranges={"lr": {"type": "continuous", "min_value": 0.1, "max_value": 0.01}}),
         "tuning.ranges.lr: min_value (0.1) must be less than max_value (0.01)"),
        (tuning(ranges={"lr": {"type": "continuous", "min_value": 0, "max_value": 1, "scaling_type": "Logarithmic"}}),
         "tuning.ranges.lr: scaling_type Logarithmic needs min_value > 0 (got 0)"),
        (tuning(ranges={"d": {"type": "continuous", "min_value": 0.5, "max_value": 1, "scaling_type": "ReverseLogarithmic"}}),
         "tuning.ranges.d: scaling_type ReverseLogarithmic needs 0 <= min_value < max_value < 1"),
        (tuning(ranges={"n": {"type": "integer", "min_value": 1, "max_value": "8"}}),
         "tuning.ranges.n.max_value: must be an integer, not the string '8'"),
        (tuning(ranges={"n": {"type": "discrete", "values": [1]}}),
         "tuning.ranges.n: type must be one of continuous, integer, categorical (got 'discrete')"),
        (tuning(ranges={"o": {"type": "categorical", "values": []}}),
         "tuning.ranges.o.values: List should have at least 1 item after validation, not 0"),
        (tuning(ranges={"o": {"type": "categorical", "values": ["a", "a"]}}), "tuning.ranges.o.values: values must be distinct"),
        (tuning(ranges={"sagemaker_program": {"type": "categorical", "values": ["a"]}}),
         "tuning.ranges: 'sagemaker_program': hyperparameters starting with 'sagemaker_' are SageMaker's own"),
        (tuning(ranges={}), "tuning.ranges: Dictionary should have at least 1 item after validation, not 0"),
        (tuning(objective={"metric": "acc", "type": "Max"}), "tuning.objective.type: Input should be 'Maximize' or 'Minimize'"),
        (tuning(strategy="Hyperband", early_stopping="Auto"),
         "tuning: strategy Hyperband stops jobs itself: early_stopping must be Off"),
        (tuning(strategy="Grid"),
         "tuning: strategy Grid searches categorical ranges only; lr must be type: categorical (list the values to try)"),
        (tuning(max_jobs=None), "tuning: max_jobs is required with strategy Bayesian (only Grid derives it)"),
        (tuning(max_jobs=2, max_parallel_jobs=3), "tuning: max_parallel_jobs (3) exceeds max_jobs (2)"),
        (tuning(max_jobs=True), "tuning.max_jobs: must be an integer, not a boolean (true)"),
        (tuning(max_parallel_jobs=0), "tuning.max_parallel_jobs: Input should be greater than or equal to 1"),
        (tuning(early_stoping="Auto"), "tuning.early_stoping: unknown field (check the spelling; see `airflow-dist-training schema`)"),
    ],
)  # fmt: skip
def test_each_problem_names_its_field(data: dict[str, Any], expected: str) -> None:
    assert expected in problems(data)


def test_grid_defaults_to_every_combination_and_refuses_more() -> None:
    grid = {
        "a": {"type": "categorical", "values": [1, 2, 3]},
        "b": {"type": "categorical", "values": ["x", "y"]},
    }
    assert load_tuning_spec(tuning(strategy="Grid", max_jobs=None, ranges=grid)).total_jobs == 6
    assert "tuning: max_jobs (7) exceeds the grid's 6 combinations" in problems(
        tuning(strategy="Grid", max_jobs=7, ranges=grid)
    )


def test_the_objective_must_be_one_of_the_training_metric_definitions() -> None:
    spec = load_spec(TRAINING)
    wrong = load_tuning_spec(tuning(objective={"metric": "val:acc", "type": "Maximize"}))
    assert [str(p) for p in tuning_problems(spec, wrong)] == [
        "tuning.objective.metric: 'val:acc' is not one of the training spec's metric_definitions "
        "('validation:accuracy')"
    ]
    bare = load_spec({**TRAINING, "metric_definitions": []})
    assert "none: add metric_definitions to the training spec" in str(tuning_problems(bare, wrong)[0])
    assert tuning_problems(spec, load_tuning_spec(tuning())) == []


def test_numbers_keep_the_type_they_were_written_with() -> None:
    spec = load_tuning_spec(tuning(ranges={"m": {"type": "continuous", "min_value": 0, "max_value": 1}}))
    rng = spec.ranges["m"]
    assert (rng.min_value, rng.max_value) == (0, 1) and isinstance(rng.min_value, int)  # type: ignore[union-attr]
