"""The SageMaker evaluation backend: a processing job on the moto server, Stubber for failures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from airflow_dist_training.evaluation.processing import build_processing_job_request
from airflow_dist_training.hooks.evaluation import (
    ArtifactStore,
    EvaluationScriptError,
    SageMakerEvaluationRunner,
)

pytestmark = pytest.mark.integration

BUCKET = "adt-eval-tests"
ROLE = "arn:aws:iam::123456789012:role/sm-exec"


def request(name: str = "eval-job-1") -> dict[str, Any]:
    return build_processing_job_request(
        job_name=name,
        role_arn=ROLE,
        image_uri="img:1",
        script_uri=f"s3://{BUCKET}/code/evaluate.py",
        model_uri=f"s3://{BUCKET}/train/output/model.tar.gz",
        output_uri=f"s3://{BUCKET}/eval/run1",
    )


def test_processing_job_is_created_and_its_evaluation_read(s3: Any, sagemaker: Any) -> None:
    # moto never runs the container: the test plays the script and puts evaluation.json in place.
    s3.put_object(
        Bucket=BUCKET, Key="eval/run1/evaluation.json", Body=json.dumps({"metrics": {"accuracy": 0.91}})
    )
    runner = SageMakerEvaluationRunner(aws_conn_id=None, region_name="us-east-1", poll_interval=0)
    info, uri = runner.run(request())
    assert info["job_name"] == "eval-job-1" and info["status"] == "Completed"
    assert uri == f"s3://{BUCKET}/eval/run1/evaluation.json"
    assert ArtifactStore(None, "us-east-1").load_evaluation(uri).metrics == {"accuracy": 0.91}
    desc = sagemaker.describe_processing_job(ProcessingJobName="eval-job-1")
    assert desc["AppSpecification"] == request()["AppSpecification"]
    assert desc["ProcessingInputs"][0]["S3Input"]["S3Uri"] == f"s3://{BUCKET}/train/output/model.tar.gz"
    assert desc["ProcessingOutputConfig"] == request()["ProcessingOutputConfig"]
    # A retry attaches to the existing job instead of creating a second one.
    info2, _ = runner.run(request())
    assert info2["job_arn"] == info["job_arn"]


def test_processing_job_not_writing_evaluation_is_a_clear_error(s3: Any, sagemaker: Any) -> None:
    from airflow_dist_training.errors import SpecValidationError

    runner = SageMakerEvaluationRunner(aws_conn_id=None, region_name="us-east-1", poll_interval=0)
    _, uri = runner.run(request("eval-job-2"))
    with pytest.raises(SpecValidationError) as exc:
        ArtifactStore(None, "us-east-1").load_evaluation(uri)
    assert str(exc.value) == f"{uri}: cannot read: NoSuchKey: The specified key does not exist."


def test_failed_processing_job_reports_failure_reason() -> None:
    import boto3

    runner = SageMakerEvaluationRunner(aws_conn_id=None, region_name="us-east-1", poll_interval=0)
    client = boto3.client("sagemaker", region_name="us-east-1")
    runner.__dict__["client"] = client
    req = request("eval-job-3")
    base = {
        "ProcessingJobName": "eval-job-3",
        "ProcessingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:processing-job/eval-job-3",
        "ProcessingResources": req["ProcessingResources"],
        "AppSpecification": req["AppSpecification"],
        "CreationTime": "2026-01-01T00:00:00Z",
    }
    with Stubber(client) as stub:
        stub.add_client_error(
            "describe_processing_job",
            "ValidationException",
            "Could not find requested job with name eval-job-3",
            expected_params={"ProcessingJobName": "eval-job-3"},
        )
        stub.add_response("create_processing_job", {"ProcessingJobArn": base["ProcessingJobArn"]}, req)
        stub.add_response(
            "describe_processing_job",
            {**base, "ProcessingJobStatus": "InProgress"},
            {"ProcessingJobName": "eval-job-3"},
        )
        stub.add_response(
            "describe_processing_job",
            {
                **base,
                "ProcessingJobStatus": "Failed",
                "FailureReason": "AlgorithmError: ModuleNotFoundError: No module named 'sklearn'",
            },
            {"ProcessingJobName": "eval-job-3"},
        )
        with pytest.raises(EvaluationScriptError) as exc:
            runner.run(req)
        stub.assert_no_pending_responses()
    assert str(exc.value) == (
        "evaluation processing job eval-job-3 ended Failed: AlgorithmError: ModuleNotFoundError: No module named 'sklearn'"
    )
