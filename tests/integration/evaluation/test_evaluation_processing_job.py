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
    assert str(exc.value) == f"{uri}: cannot read: no such file"


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


def processing_jobs() -> dict[str, Any]:
    from moto.sagemaker.models import sagemaker_backends

    return dict(sagemaker_backends["123456789012"]["us-east-1"].processing_jobs)


@pytest.fixture
def jobs_start_in_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto completes processing jobs at once; here they stay InProgress until the test moves them."""
    from moto.sagemaker.models import FakeProcessingJob

    original = FakeProcessingJob.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.processing_job_status = "InProgress"

    monkeypatch.setattr(FakeProcessingJob, "__init__", init)


def test_retry_after_a_failed_job_starts_the_next_generation(s3: Any, sagemaker: Any) -> None:
    runner = SageMakerEvaluationRunner(aws_conn_id=None, region_name="us-east-1", poll_interval=0)
    runner.start(request("eval-job-4"))
    processing_jobs()["eval-job-4"].processing_job_status = "Failed"
    s3.put_object(Bucket=BUCKET, Key="eval/run1/evaluation.json", Body=json.dumps({"metrics": {"f1": 0.8}}))
    info, _ = runner.run(request("eval-job-4"), retry_names=["eval-job-4-r2", "eval-job-4-r3"])
    assert info["job_name"] == "eval-job-4-r2" and info["status"] == "Completed"
    assert sorted(processing_jobs()) == ["eval-job-4", "eval-job-4-r2"]
    # once every generation has ended Failed/Stopped, nothing more is started
    processing_jobs()["eval-job-4-r2"].processing_job_status = "Stopped"
    with pytest.raises(
        EvaluationScriptError, match=r"every evaluation job of this run ended Failed or Stopped"
    ):
        runner.start(request("eval-job-4"), retry_names=["eval-job-4-r2"])
    assert len(processing_jobs()) == 2


def test_a_timed_out_wait_stops_the_job(s3: Any, sagemaker: Any, jobs_start_in_progress: None) -> None:
    runner = SageMakerEvaluationRunner(aws_conn_id=None, region_name="us-east-1", poll_interval=0.01)
    with pytest.raises(EvaluationScriptError, match=r"still InProgress after 0.05s; the job was stopped"):
        runner.run(request("eval-job-5"), timeout=0.05)
    assert processing_jobs()["eval-job-5"].processing_job_status == "Stopped"


def test_killing_the_task_stops_the_processing_job(
    s3: Any, sagemaker: Any, jobs_start_in_progress: None
) -> None:
    import threading
    import time

    from airflow_dist_training.operators.evaluation import EvaluationOperator

    op = EvaluationOperator(
        task_id="evaluate",
        backend="sagemaker",
        script=f"s3://{BUCKET}/code/evaluate.py",
        model_uri=f"s3://{BUCKET}/train/output/model.tar.gz",
        output_uri=f"s3://{BUCKET}/eval/run1",
        image_uri="img:1",
        role_arn=ROLE,
        job_name="eval-killed",
        poll_interval=0.01,
        aws_conn_id=None,
        region_name="us-east-1",
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute({})  # type: ignore[arg-type]
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while getattr(op._runner, "job", None) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    op.on_kill()
    thread.join(30)
    assert processing_jobs()["eval-killed"].processing_job_status == "Stopped"
    assert [str(e) for e in errors] == [
        "evaluation processing job eval-killed was stopped on request (task killed, cleared or timed out)"
    ]
