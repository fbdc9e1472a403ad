"""Every example spec validates and plans for each backend it claims.

Every spec claims SageMaker; a spec claims the local backend too when it sets a ``local_*``
stand-in (``local_source``, ``local_uri``) for its S3 locations.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.loading import load_spec, read_yaml_file
from tests.paths import REPO

SPECS = sorted((REPO / "examples" / "specs").glob("*.yaml"))


def _has_local_stand_ins(data: Any) -> bool:
    if isinstance(data, dict):
        return any((k.startswith("local_") and k != "local_path") or _has_local_stand_ins(v) for k, v in data.items())
    if isinstance(data, list):
        return any(_has_local_stand_ins(v) for v in data)
    return False


def _cases() -> list[Any]:
    cases = []
    for path in SPECS:
        cases.append(pytest.param(path, "sagemaker", id=f"{path.stem}-sagemaker"))
        if _has_local_stand_ins(read_yaml_file(path)):
            cases.append(pytest.param(path, "local", id=f"{path.stem}-local"))
    return cases


@pytest.mark.parametrize(("path", "backend"), _cases())
def test_example_spec_validates_and_plans(path, backend):
    spec = load_spec(path)
    if backend == "sagemaker":
        plan = plan_training_job(spec, job_name="example-1", region="us-east-1")
        assert plan.request["ResourceConfig"]
        assert plan.cluster.processes >= 1
    else:
        from airflow_dist_training.hooks.local_training import LocalTrainingHook

        local = LocalTrainingHook(base_dir=REPO).plan(spec, "example-1", check_paths=False)
        assert local.hosts and local.processes_per_host >= 1


def test_the_demo_spec_claims_both_backends():
    ids = [p.id for p in _cases()]
    assert {"local_demo-sagemaker", "local_demo-local"} <= set(ids)
