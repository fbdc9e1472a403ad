"""One region rule: the plan task and the training task resolve the same region, so the image URI
shown at plan time is the one sent in CreateTrainingJob."""

from __future__ import annotations

import pytest

from airflow_dist_training.hooks.aws import task_region
from airflow_dist_training.hooks.backends import plan_on_backend
from airflow_dist_training.operators.training import DistributedTrainingOperator
from airflow_dist_training.spec.loading import load_spec
from tests.paths import REPO

SPEC = REPO / "examples" / "specs" / "pytorchddp_p3.yaml"


def _plan_and_submit_images() -> tuple[str, str]:
    spec = load_spec(SPEC)
    planned = plan_on_backend(
        spec, backend="sagemaker", overrides=None, train_task_id="train", context={}, aws_conn_id=None
    )
    op = DistributedTrainingOperator(task_id="train", spec=spec, aws_conn_id=None)
    submitted = op._run_job({})  # type: ignore[arg-type]
    assert planned.request is not None and submitted.request is not None
    return (
        planned.request["AlgorithmSpecification"]["TrainingImage"],
        submitted.request["AlgorithmSpecification"]["TrainingImage"],
    )


def test_only_aws_region_set_plan_and_submit_use_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # the case that used to differ: the plan task ignored AWS_REGION (us-east-1), training used it
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert task_region(None) == "eu-west-1"
    plan_image, submit_image = _plan_and_submit_images()
    assert ".eu-west-1." in plan_image
    assert submit_image == plan_image


def test_both_set_the_connection_region_wins_in_both_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore reads AWS_DEFAULT_REGION: that is where requests go, so it is the connection's region
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert task_region(None) == "us-west-2"
    assert task_region(None, "ap-south-1") == "ap-south-1"
    plan_image, submit_image = _plan_and_submit_images()
    assert ".us-west-2." in plan_image
    assert submit_image == plan_image
