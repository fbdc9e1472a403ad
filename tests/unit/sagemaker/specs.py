from __future__ import annotations

from typing import Any

import pytest

from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.training import TrainingJobSpec
from tests.paths import REPO

SPECS = REPO / "examples" / "specs"
JOB = "job-0123456789"
REGION = "us-east-1"


def example(name: str, **overrides: Any) -> TrainingJobSpec:
    spec = load_spec(SPECS / f"{name}.yaml")
    if not overrides:
        return spec
    data = spec.model_dump(mode="json", exclude_unset=True)
    for dotted, value in overrides.items():
        target = data
        *parents, leaf = dotted.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    return load_spec(data)


@pytest.fixture
def base_spec() -> dict[str, Any]:
    return {
        "name": "unit",
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
        "output": {"s3_path": "s3://my-ml-bucket/output"},
    }
