"""airflow-dist-training: distributed SageMaker training as first-class Airflow tasks.

Kept deliberately light: importing the package must not import boto3, botocore, torch or the
Amazon provider (DAG-parse time). Public classes load lazily through ``__getattr__``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY_IMPORTS: dict[str, str] = {
    "TrainingJobSpec": "airflow_dist_training.spec.training",
    "SpecValidationError": "airflow_dist_training.errors",
    "load_spec": "airflow_dist_training.spec.loading",
    "plan_training_job": "airflow_dist_training.sagemaker.request",
}


def __getattr__(name: str) -> Any:
    module = _LAZY_IMPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_dist_training' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["__version__", *_LAZY_IMPORTS]
