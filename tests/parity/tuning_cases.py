"""Parity cases of ``CreateHyperParameterTuningJob``: an example training spec + a tuning section.

Each case is planned by ``plan_tuning_job`` and built with the SDK's ``HyperparameterTuner`` over
the same estimator (``mapping.sdk_estimator_case``) by ``sdk_driver.run_tuning``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_dist_training.sagemaker.tuning import tuning_job_name
from airflow_dist_training.spec.training import TrainingJobSpec
from airflow_dist_training.spec.tuning import TuningSpec
from tests.parity.cases import REGION, RUN_IDENTITY, load
from tests.parity.mapping import sdk_estimator_case

METRICS = [
    {"name": "train_loss", "regex": "loss=([0-9\\.]+)"},
    {"name": "validation:accuracy", "regex": "val_acc=([0-9\\.]+)"},
]
EVERY_RANGE = {
    "lr": {"type": "continuous", "min_value": 0.0001, "max_value": 0.1, "scaling_type": "Logarithmic"},
    "momentum": {"type": "continuous", "min_value": 0, "max_value": 1},
    "dropout": {
        "type": "continuous",
        "min_value": 0.5,
        "max_value": 0.99,
        "scaling_type": "ReverseLogarithmic",
    },
    "layers": {"type": "integer", "min_value": 1, "max_value": 8, "scaling_type": "Linear"},
    "optimizer": {"type": "categorical", "values": ["sgd", "adam"]},
    "batch-size": {"type": "categorical", "values": [32, 64, 128]},
    "nesterov": {"type": "categorical", "values": [True, False]},
}


@dataclass(frozen=True)
class TuningCase:
    id: str
    example: str
    tuning: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)
    run_identity: bool = False

    @property
    def spec(self) -> TrainingJobSpec:
        return load(self.example, {"metric_definitions": METRICS, **self.overrides})

    @property
    def tuning_spec(self) -> TuningSpec:
        return TuningSpec.model_validate(self.tuning)

    @property
    def job_name(self) -> str:
        return tuning_job_name(f"tune-{self.id}", RUN_IDENTITY)


def _tuning(**over: Any) -> dict[str, Any]:
    return {
        "objective": {"metric": "validation:accuracy", "type": "Maximize"},
        "max_jobs": 8,
        "max_parallel_jobs": 2,
        "ranges": EVERY_RANGE,
        **over,
    }


TUNING_CASES = [
    TuningCase("bayesian_pytorch", "torch_distributed_p4d", _tuning()),
    TuningCase(
        "random_tensorflow",
        "mpi_horovod",
        _tuning(strategy="Random", random_seed=7, max_runtime_seconds=7200, early_stopping="Auto"),
    ),
    TuningCase(
        "grid_minimize",
        "pytorchddp_p3",
        {
            "strategy": "Grid",
            "objective": {"metric": "train_loss", "type": "Minimize"},
            "max_jobs": 4,
            "max_parallel_jobs": 4,
            "ranges": {
                "optimizer": {"type": "categorical", "values": ["sgd", "adam"]},
                "width": {"type": "categorical", "values": [1, 2]},
            },
        },
    ),
    TuningCase(
        "grid_every_combination",
        "torch_distributed_p4d",
        {
            "strategy": "Grid",
            "objective": {"metric": "validation:accuracy", "type": "Maximize"},
            "max_parallel_jobs": 2,
            "ranges": {"optimizer": {"type": "categorical", "values": ["sgd", "adam", "adamw"]}},
        },
    ),
    TuningCase("hyperband_huggingface", "huggingface_p4d", _tuning(strategy="Hyperband")),
    TuningCase(
        "every_definition_field",
        "torch_distributed_p4d",
        _tuning(),
        {
            "distribution": {"strategy": "none"},
            "compute": {"instance_count": 1, "volume_kms_key": "kms-vol", "volume_size_gb": 100},
            "environment": {"NCCL_DEBUG": "INFO"},
            "network": {
                "subnets": ["subnet-1"],
                "security_group_ids": ["sg-1"],
                "network_isolation": True,
                "inter_container_encryption": True,
            },
            "spot": {"enabled": True, "max_wait_seconds": 90000},
            "checkpoint": {"s3_uri": "s3://ckpt-bucket/ckpt", "local_path": "/opt/ml/checkpoints"},
            "max_retry_attempts": 3,
            "output": {"s3_path": "s3://out-bucket/models", "kms_key": "kms-out"},
            "hyperparameters": {"epochs": 10, "lr": 0.5, "optimizer": "sgd", "note": "kept static"},
            "input_mode": "FastFile",
        },
    ),
    TuningCase("run_identity_tag", "torch_distributed_p4d", _tuning(), run_identity=True),
]


def sdk_tuning_case(case: TuningCase) -> dict[str, Any]:
    """The driver's ``tuning`` case: the estimator case plus the ``HyperparameterTuner`` kwargs."""
    spec, tuning = case.spec, case.tuning_spec
    out = sdk_estimator_case(f"tuning:{case.id}", spec, job_name=case.job_name, region=REGION)
    out["kind"] = "tuning"
    tuner: dict[str, Any] = {
        "objective_metric_name": tuning.objective.metric,
        "objective_type": tuning.objective.type,
        "metric_definitions": [{"Name": m.name, "Regex": m.regex} for m in spec.metric_definitions],
        "strategy": tuning.strategy,
        "max_jobs": tuning.max_jobs,
        "max_parallel_jobs": tuning.max_parallel_jobs,
        "early_stopping_type": tuning.early_stopping,
        "ranges": {name: r.model_dump() for name, r in tuning.ranges.items()},
    }
    if tuning.random_seed is not None:
        tuner["random_seed"] = tuning.random_seed
    if tuning.max_runtime_seconds is not None:
        tuner["max_runtime_in_seconds"] = tuning.max_runtime_seconds
    out["tuner"] = tuner
    return out
