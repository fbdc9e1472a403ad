"""Plan a SageMaker hyperparameter tuning job: training spec + tuning section -> ``CreateHyperParameterTuningJob``.

Pure: no AWS call, no Airflow import. The request is the SageMaker Python SDK v2's
``HyperparameterTuner(estimator, ...).fit(job_name=...)`` (pinned by tests/parity/test_tuning_parity.py):
the training job is planned first under the tuning job's name, as the SDK prepares its estimator,
then narrowed to what a tuning job's training jobs take. The tuning job's name is deterministic from
the run identity and at most 32 characters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.sagemaker.naming import job_name
from airflow_dist_training.sagemaker.request import TrainingPlan, plan_training_job
from airflow_dist_training.sagemaker.strategies import record_for
from airflow_dist_training.sagemaker.tuning_jobs import DEFINITION_FIELDS
from airflow_dist_training.sagemaker.uploads import Upload
from airflow_dist_training.spec.training import TrainingJobSpec
from airflow_dist_training.spec.tuning import (
    CategoricalRange,
    ContinuousRange,
    IntegerRange,
    TuningSpec,
    tuning_problems,
)

TUNING_JOB_NAME_MAX_LENGTH = 32  # the SDK's HyperparameterTuner.TUNING_JOB_NAME_MAX_LENGTH
# the SDK's estimator class of each framework (for its attach(); framework estimators only)
SDK_ESTIMATORS = {
    "pytorch": ("PyTorch", "sagemaker.pytorch.estimator"),
    "tensorflow": ("TensorFlow", "sagemaker.tensorflow.estimator"),
    "huggingface": ("HuggingFace", "sagemaker.huggingface.estimator"),
}


@dataclass(frozen=True)
class TuningPlan:
    """The ``CreateHyperParameterTuningJob`` request and the training plan it came from."""

    job_name: str
    region: str
    request: dict[str, Any]
    training: TrainingPlan
    warnings: list[Problem] = field(default_factory=list)

    @property
    def uploads(self) -> list[Upload]:
        """What must be in S3 before the create (the training job's code)."""
        return list(self.training.uploads)

    def summary(self) -> dict[str, Any]:
        config = self.request["HyperParameterTuningJobConfig"]
        return {
            "job_name": self.job_name,
            "region": self.region,
            "strategy": config["Strategy"],
            "objective": config["HyperParameterTuningJobObjective"],
            "resource_limits": config["ResourceLimits"],
            "training": self.training.summary(),
            "warnings": [str(w) for w in self.warnings],
        }


def tuning_job_name(base: str, identity: str, generation: int = 1) -> str:
    """The run's tuning job name: ``<base>-<run hash>[-r<n>]``, at most 32 characters."""
    return job_name(base, identity, generation, max_length=TUNING_JOB_NAME_MAX_LENGTH)


def plan_tuning_job(
    spec: TrainingJobSpec,
    tuning: TuningSpec,
    *,
    job_name: str,
    region: str,
    run_identity: str | None = None,
) -> TuningPlan:
    """Validate and build the exact ``CreateHyperParameterTuningJob`` request (every problem at once)."""
    problems = tuning_plan_problems(spec, tuning, job_name)
    try:
        training = plan_training_job(spec, job_name=job_name, region=region, run_identity=run_identity)
    except SpecValidationError as exc:  # the training spec's problems and the tuning section's, together
        seen = {p.path for p in problems}  # one message per field: the tuning one says what tuning needs
        problems += [p for p in exc.problems if p.path not in seen]
        raise SpecValidationError(problems, source=spec.source_file) from None
    if problems:
        raise SpecValidationError(problems, source=spec.source_file)
    return TuningPlan(
        job_name=job_name,
        region=region,
        request=tuning_request(spec, tuning, job_name, training.request),
        training=training,
        warnings=training.warnings,
    )


def tuning_plan_problems(spec: TrainingJobSpec, tuning: TuningSpec, job_name: str) -> list[Problem]:
    """What keeps ``spec`` from being tuned this way under ``job_name`` (the training spec's own
    problems aside), each naming its field."""
    problems = tuning_problems(spec, tuning)
    record = record_for(spec.distribution.strategy)
    if not record.script_mode:
        problems.append(
            Problem(
                "distribution.strategy",
                f"{record.strategy.value!r} starts the job through its own container entry point, which a "
                "tuning job's training jobs cannot have: use a script-mode strategy (e.g. none, "
                "torch_distributed, pytorchddp)",
            )
        )
    if len(job_name) > TUNING_JOB_NAME_MAX_LENGTH:
        problems.append(
            Problem(
                "tuning.name",
                f"tuning job name {job_name!r} is longer than {TUNING_JOB_NAME_MAX_LENGTH} characters",
            )
        )
    return problems


def tuning_request(
    spec: TrainingJobSpec, tuning: TuningSpec, job_name: str, training: dict[str, Any]
) -> dict[str, Any]:
    """``CreateHyperParameterTuningJob`` from the ``CreateTrainingJob`` request planned under ``job_name``."""
    request: dict[str, Any] = {
        "HyperParameterTuningJobName": job_name,
        "HyperParameterTuningJobConfig": tuning_config(
            tuning, script_mode=record_for(spec.distribution.strategy).script_mode
        ),
        "TrainingJobDefinition": training_job_definition(spec, tuning, training),
    }
    if training.get("Tags"):
        request["Tags"] = list(training["Tags"])
    return request


def tuning_config(tuning: TuningSpec, *, script_mode: bool = True) -> dict[str, Any]:
    """``HyperParameterTuningJobConfig`` (``Session._map_tuning_config``)."""
    limits: dict[str, Any] = {"MaxParallelTrainingJobs": tuning.max_parallel_jobs}
    if tuning.max_jobs is not None:  # Grid without max_jobs: SageMaker tries every combination
        limits = {"MaxNumberOfTrainingJobs": tuning.max_jobs, **limits}
    if tuning.max_runtime_seconds is not None:
        limits["MaxRuntimeInSeconds"] = tuning.max_runtime_seconds
    config: dict[str, Any] = {
        "Strategy": tuning.strategy,
        "ResourceLimits": limits,
        "TrainingJobEarlyStoppingType": tuning.early_stopping,
    }
    if tuning.random_seed is not None:
        config["RandomSeed"] = tuning.random_seed
    config["HyperParameterTuningJobObjective"] = {
        "Type": tuning.objective.type,
        "MetricName": tuning.objective.metric,
    }
    config["ParameterRanges"] = parameter_ranges(tuning, script_mode=script_mode)
    return config


def parameter_ranges(tuning: TuningSpec, *, script_mode: bool = True) -> dict[str, list[dict[str, Any]]]:
    """``ParameterRanges`` in the SDK's order (Continuous, Categorical, Integer), every list present."""
    out: dict[str, list[dict[str, Any]]] = {
        "ContinuousParameterRanges": [],
        "CategoricalParameterRanges": [],
        "IntegerParameterRanges": [],
    }
    for name, rng in tuning.ranges.items():
        if isinstance(rng, CategoricalRange):
            values = [str(v) for v in rng.values]
            if script_mode:
                values = [json.dumps(v) for v in values]
            out["CategoricalParameterRanges"].append({"Name": name, "Values": values})
        else:
            key = (
                "ContinuousParameterRanges" if isinstance(rng, ContinuousRange) else "IntegerParameterRanges"
            )
            assert isinstance(rng, ContinuousRange | IntegerRange)
            out[key].append(
                {
                    "Name": name,
                    "MinValue": str(rng.min_value),
                    "MaxValue": str(rng.max_value),
                    "ScalingType": rng.scaling_type,
                }
            )
    return out


def static_hyperparameters(
    spec: TrainingJobSpec, tuning: TuningSpec, training: dict[str, Any]
) -> dict[str, str]:
    """The training request's hyperparameters minus the tuned ones (+ the SDK's estimator class in script mode)."""
    static = {k: v for k, v in (training.get("HyperParameters") or {}).items() if k not in tuning.ranges}
    if record_for(spec.distribution.strategy).script_mode:
        cls, module = SDK_ESTIMATORS[spec.image.framework or "pytorch"]
        static["sagemaker_estimator_class_name"] = json.dumps(cls)
        static["sagemaker_estimator_module"] = json.dumps(module)
    return static


def training_job_definition(
    spec: TrainingJobSpec, tuning: TuningSpec, training: dict[str, Any]
) -> dict[str, Any]:
    """``TrainingJobDefinition`` from the planned ``CreateTrainingJob`` request (``Session._map_training_config``)."""
    resource = training["ResourceConfig"]
    hpo_resource: dict[str, Any] = {}
    if "VolumeKmsKeyId" in resource:
        hpo_resource["VolumeKmsKeyId"] = resource["VolumeKmsKeyId"]
    hpo_resource.update(
        InstanceCount=resource["InstanceCount"],
        InstanceType=resource["InstanceType"],
        VolumeSizeInGB=resource["VolumeSizeInGB"],
    )
    stopping = {
        k: v
        for k, v in training["StoppingCondition"].items()
        if k in ("MaxRuntimeInSeconds", "MaxWaitTimeInSeconds")
    }
    algorithm = training["AlgorithmSpecification"]
    hpo_algorithm: dict[str, Any] = {"TrainingInputMode": algorithm["TrainingInputMode"]}
    if "MetricDefinitions" in algorithm:
        hpo_algorithm["MetricDefinitions"] = list(algorithm["MetricDefinitions"])
    hpo_algorithm["TrainingImage"] = algorithm["TrainingImage"]
    definition: dict[str, Any] = {
        "StaticHyperParameters": static_hyperparameters(spec, tuning, training),
        "RoleArn": training["RoleArn"],
        "OutputDataConfig": dict(training["OutputDataConfig"]),
        "StoppingCondition": stopping,
        "HyperParameterTuningResourceConfig": hpo_resource,
        "AlgorithmSpecification": hpo_algorithm,
    }
    definition.update({k: training[k] for k in DEFINITION_FIELDS if k in training})
    return definition


def best_training_job(description: dict[str, Any]) -> dict[str, Any] | None:
    """The tuning job's best training job as the operator hands it on (None before one succeeded).

    ``{"job_name", "objective_metric", "objective_value", "tuned_hyperparameters"}``; the model
    artifacts come from the training job's own description.
    """
    best = description.get("BestTrainingJob")
    if not best or not best.get("TrainingJobName"):
        return None
    metric = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    return {
        "job_name": str(best["TrainingJobName"]),
        "objective_metric": metric.get("MetricName"),
        "objective_value": metric.get("Value"),
        "tuned_hyperparameters": dict(best.get("TunedHyperParameters") or {}),
    }
