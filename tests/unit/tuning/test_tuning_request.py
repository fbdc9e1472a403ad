"""``plan_tuning_job``: the CreateHyperParameterTuningJob request (SDK parity is in tests/parity), its
name, and the errors raised before anything launches."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.sagemaker.naming import run_identity, run_identity_hash
from airflow_dist_training.sagemaker.request import RUN_IDENTITY_TAG, plan_training_job
from airflow_dist_training.sagemaker.tuning import best_training_job, plan_tuning_job, tuning_job_name
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.tuning import load_tuning_spec
from tests.unit.tuning.test_tuning_spec import TRAINING, tuning

IDENTITY = run_identity("dag", "tune", "manual__1")


def plan(training: dict[str, Any] | None = None, **tuning_over: Any) -> dict[str, Any]:
    spec = load_spec(training or {**TRAINING, "hyperparameters": {"epochs": 3, "lr": 0.5}})
    name = tuning_job_name(spec.name, IDENTITY)
    return plan_tuning_job(
        spec,
        load_tuning_spec(tuning(**tuning_over)),
        job_name=name,
        region="us-east-1",
        run_identity=IDENTITY,
    ).request


def test_tuning_job_names_are_deterministic_and_fit_32_characters() -> None:
    base = "a-very-long-model-name-for-the-churn-team"
    digest = run_identity_hash(IDENTITY)
    assert tuning_job_name(base, IDENTITY) == f"a-very-long-model-nam-{digest}"  # 32: head cut, hash kept
    assert tuning_job_name(base, IDENTITY, 2) == f"a-very-long-model-{digest}-r2"
    assert tuning_job_name("m_1", IDENTITY) == f"m-1-{digest}"
    assert tuning_job_name("m", IDENTITY) != tuning_job_name("m", run_identity("dag", "tune", "manual__2"))


def test_the_request_is_the_training_request_narrowed_to_a_definition() -> None:
    request = plan(
        ranges={
            "lr": {"type": "continuous", "min_value": 0.001, "max_value": 0.1, "scaling_type": "Logarithmic"},
            "layers": {"type": "integer", "min_value": 1, "max_value": 4},
            "optimizer": {"type": "categorical", "values": ["sgd", "adam", 3]},
        }
    )
    name = request["HyperParameterTuningJobName"]
    config = request["HyperParameterTuningJobConfig"]
    assert config == {
        "Strategy": "Bayesian",
        "ResourceLimits": {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2},
        "TrainingJobEarlyStoppingType": "Off",
        "HyperParameterTuningJobObjective": {"Type": "Maximize", "MetricName": "validation:accuracy"},
        "ParameterRanges": {
            "ContinuousParameterRanges": [
                {"Name": "lr", "MinValue": "0.001", "MaxValue": "0.1", "ScalingType": "Logarithmic"}
            ],
            # script mode: str() then JSON, as the SDK's as_json_range (the toolkit json.loads them)
            "CategoricalParameterRanges": [{"Name": "optimizer", "Values": ['"sgd"', '"adam"', '"3"']}],
            "IntegerParameterRanges": [
                {"Name": "layers", "MinValue": "1", "MaxValue": "4", "ScalingType": "Auto"}
            ],
        },
    }
    definition = request["TrainingJobDefinition"]
    static = definition["StaticHyperParameters"]
    assert "lr" not in static, "a tuned hyperparameter is not static"
    assert static["epochs"] == "3"
    assert static["sagemaker_job_name"] == json.dumps(name)  # the code is planned under the tuning job
    assert static["sagemaker_estimator_class_name"] == '"PyTorch"'
    assert static["sagemaker_estimator_module"] == '"sagemaker.pytorch.estimator"'
    assert definition["HyperParameterTuningResourceConfig"] == {
        "InstanceCount": 1,
        "InstanceType": "ml.m5.xlarge",
        "VolumeSizeInGB": 30,
    }
    assert set(definition["AlgorithmSpecification"]) == {
        "TrainingInputMode",
        "MetricDefinitions",
        "TrainingImage",
    }
    assert "DebugHookConfig" not in definition and "ProfilerConfig" not in definition
    assert request["Tags"] == [{"Key": RUN_IDENTITY_TAG, "Value": IDENTITY}]


def test_the_definition_carries_the_training_request_settings() -> None:
    training = {
        **TRAINING,
        "environment": {"A": "1"},
        "channels": {"train": {"type": "s3", "uri": "s3://bucket/data/train"}},
        "checkpoint": {"s3_uri": "s3://bucket/ckpt"},
        "spot": {"enabled": True, "max_wait_seconds": 90000},
        "max_retry_attempts": 2,
        "stopping": {"max_runtime_seconds": 3600, "max_pending_seconds": 7200},
    }
    request = plan(training)
    spec = load_spec(training)
    planned = plan_training_job(
        spec, job_name=request["HyperParameterTuningJobName"], region="us-east-1", run_identity=IDENTITY
    ).request
    definition = request["TrainingJobDefinition"]
    for key in (
        "InputDataConfig",
        "Environment",
        "CheckpointConfig",
        "RetryStrategy",
        "RoleArn",
        "OutputDataConfig",
    ):
        assert definition[key] == planned[key], key
    assert definition["EnableManagedSpotTraining"] is True
    assert definition["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 90000}


def test_problems_of_both_specs_are_reported_together_before_anything_launches() -> None:
    training = {
        **TRAINING,
        "compute": {"instance_groups": [{"name": "a", "instance_type": "ml.m5.xlarge", "instance_count": 1}]},
        "distribution": {"strategy": "launcher"},
        "image": {
            "uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1",
            "container_entry_point": ["python"],
        },
    }
    with pytest.raises(SpecValidationError) as err:
        plan(training, objective={"metric": "loss", "type": "Minimize"})
    paths = [p.path for p in err.value.problems]
    assert paths == ["tuning.objective.metric", "compute.instance_groups", "image.container_entry_point",
                     "distribution.strategy"]  # fmt: skip
    assert "use a script-mode strategy" in str(err.value)


def test_a_training_spec_problem_is_the_training_planner_s_message_next_to_the_tuning_ones() -> None:
    no_output = {k: v for k, v in TRAINING.items() if k != "output"}
    with pytest.raises(
        SpecValidationError, match=re.escape("output.s3_path: is required for SageMaker jobs")
    ):
        plan(no_output)
    with pytest.raises(SpecValidationError) as err:
        plan(no_output, objective={"metric": "loss", "type": "Minimize"})
    assert [p.path for p in err.value.problems] == ["tuning.objective.metric", "output.s3_path"]


def test_best_training_job_is_read_from_the_description() -> None:
    assert best_training_job({"HyperParameterTuningJobStatus": "InProgress"}) is None
    desc = {
        "BestTrainingJob": {
            "TrainingJobName": "t-001-abc",
            "TunedHyperParameters": {"lr": "0.1"},
            "FinalHyperParameterTuningJobObjectiveMetric": {"MetricName": "acc", "Value": 0.9},
        }
    }
    assert best_training_job(desc) == {
        "job_name": "t-001-abc",
        "objective_metric": "acc",
        "objective_value": 0.9,
        "tuned_hyperparameters": {"lr": "0.1"},
    }
