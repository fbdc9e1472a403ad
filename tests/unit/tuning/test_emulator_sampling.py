"""How the test endpoint picks each training job's hyperparameters and builds its request (pure parts)."""

from __future__ import annotations

import math

from airflow_dist_training.sagemaker.tuning_jobs import (
    objective_hyperparameter,
    sample_configurations,
    training_job_name,
    training_request,
)

RANGES = {
    "ContinuousParameterRanges": [
        {"Name": "lr", "MinValue": "0.0001", "MaxValue": "0.1", "ScalingType": "Logarithmic"},
        {"Name": "dropout", "MinValue": "0.9", "MaxValue": "0.999", "ScalingType": "ReverseLogarithmic"},
    ],
    "IntegerParameterRanges": [{"Name": "layers", "MinValue": "1", "MaxValue": "3", "ScalingType": "Auto"}],
    "CategoricalParameterRanges": [{"Name": "opt", "Values": ['"sgd"', '"adam"']}],
}


def test_grid_tries_every_combination_in_order() -> None:
    grid = {
        "CategoricalParameterRanges": [
            {"Name": "a", "Values": ["1", "2"]},
            {"Name": "b", "Values": ["x", "y"]},
        ]
    }
    assert sample_configurations(grid, "Grid", None, 0) == [
        {"a": "1", "b": "x"},
        {"a": "1", "b": "y"},
        {"a": "2", "b": "x"},
        {"a": "2", "b": "y"},
    ]
    assert len(sample_configurations(grid, "Grid", 3, 0)) == 3


def test_random_draws_stay_in_their_ranges_and_repeat_for_one_seed() -> None:
    draws = sample_configurations(RANGES, "Random", 200, seed=5)
    assert draws == sample_configurations(RANGES, "Random", 200, seed=5)
    assert draws != sample_configurations(RANGES, "Random", 200, seed=6)
    lrs = [float(d["lr"]) for d in draws]
    assert all(0.0001 <= v <= 0.1 for v in lrs)
    # log scale: about as many draws per decade (uniform would put ~90 % in the top decade)
    assert sum(v < 0.001 for v in lrs) > 40
    assert all(0.9 <= float(d["dropout"]) <= 0.999 for d in draws)
    assert {d["layers"] for d in draws} == {"1", "2", "3"}
    assert {d["opt"] for d in draws} == {'"sgd"', '"adam"'}


def test_bayesian_and_hyperband_fall_back_to_random_sampling() -> None:
    for strategy in ("Bayesian", "Hyperband"):
        assert sample_configurations(RANGES, strategy, 4, 1) == sample_configurations(RANGES, "Random", 4, 1)


def test_training_jobs_are_named_and_built_as_sagemaker_does() -> None:
    name = training_job_name("tune-abc", 7)
    assert name.startswith("tune-abc-007-") and len(name.rsplit("-", 1)[1]) == 8
    request = {
        "HyperParameterTuningJobName": "tune-abc",
        "HyperParameterTuningJobConfig": {"HyperParameterTuningJobObjective": {"MetricName": "val:acc"}},
        "Tags": [{"Key": "team", "Value": "ml"}],
        "TrainingJobDefinition": {
            "StaticHyperParameters": {"epochs": "3", "lr": "0.5"},
            "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
            "RoleArn": "arn:aws:iam::123456789012:role/R",
            "OutputDataConfig": {"S3OutputPath": "s3://b/m"},
            "StoppingCondition": {"MaxRuntimeInSeconds": 60},
            "HyperParameterTuningResourceConfig": {
                "InstanceCount": 1,
                "InstanceType": "ml.m5.xlarge",
                "VolumeSizeInGB": 30,
            },
            "Environment": {"A": "1"},
        },
    }
    job = training_request(request, name, {"lr": "0.1"})
    # SageMaker adds the objective (raw here: not a script-mode container); the tuned value wins
    assert job["HyperParameters"] == {"epochs": "3", "_tuning_objective_metric": "val:acc", "lr": "0.1"}
    assert job["ResourceConfig"] == {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}
    assert job["Tags"] == request["Tags"] and job["Environment"] == {"A": "1"}
    assert not math.isnan(float(job["HyperParameters"]["lr"]))


def test_a_script_mode_container_gets_the_objective_json_quoted() -> None:
    request = {
        "HyperParameterTuningJobConfig": {"HyperParameterTuningJobObjective": {"MetricName": "val:acc"}},
        "TrainingJobDefinition": {"StaticHyperParameters": {"sagemaker_program": '"train.py"'}},
    }
    assert objective_hyperparameter(request) == {"_tuning_objective_metric": '"val:acc"'}
