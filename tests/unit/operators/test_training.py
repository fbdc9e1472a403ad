"""Pure parts of the training hook/operator/links: no AWS, no Airflow DB."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

from airflow_dist_training.aws_errors import permission_error
from airflow_dist_training.errors import AwsPermissionError, CapacityError, TrainingJobError
from airflow_dist_training.hooks.training import LogEvent, error_for_terminal_state, result_from_description
from airflow_dist_training.links.sagemaker import job_links
from airflow_dist_training.sagemaker.log_tail import merge_log_events
from airflow_dist_training.sagemaker.naming import job_name, run_identity, run_identity_hash


def test_module_import_does_not_load_boto3_or_amazon_provider() -> None:
    code = (
        "import sys; import airflow_dist_training.hooks.training, airflow_dist_training.operators.training, "
        "airflow_dist_training.sensors.training; "
        "print([m for m in sys.modules if m.startswith(('boto3', 'botocore', 'aiobotocore', 'airflow.providers.amazon.aws'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_run_identity_hash_is_the_one_in_the_job_name() -> None:
    identity = run_identity("dag", "train", "manual__2026", -1)
    assert job_name("llm", identity).endswith(run_identity_hash(identity))


def test_result_from_description_has_no_datetimes() -> None:
    t0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    t1 = datetime(2026, 1, 1, 13, 0, tzinfo=UTC)
    desc = {
        "TrainingJobName": "j",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/j",
        "TrainingJobStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/o/j/output/model.tar.gz"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
        "CheckpointConfig": {"S3Uri": "s3://b/ckpt"},
        "FinalMetricDataList": [{"MetricName": "loss", "Value": 0.5, "Timestamp": t1}],
        "TrainingStartTime": t0,
        "TrainingEndTime": t1,
        "ResourceConfig": {"InstanceCount": 4},
        "SecondaryStatusTransitions": [
            {"Status": "Training", "StartTime": t0, "EndTime": t1, "StatusMessage": "x"}
        ],
    }
    result = result_from_description(desc)
    assert json.loads(json.dumps(result)) == result
    assert result["billable_seconds"] == 3600 * 4  # (end - start) x instances when AWS gives none
    assert result["timeline"] == [
        {
            "status": "Training",
            "start": "2026-01-01T12:00:00+00:00",
            "end": "2026-01-01T13:00:00+00:00",
            "message": "x",
        }
    ]


def test_terminal_state_errors() -> None:
    base = {"TrainingJobName": "j"}
    assert (
        type(error_for_terminal_state({**base, "TrainingJobStatus": "Failed", "FailureReason": "OOM"}))
        is TrainingJobError
    )
    assert isinstance(
        error_for_terminal_state(
            {**base, "TrainingJobStatus": "Failed", "FailureReason": "ResourceLimitExceeded: quota"}
        ),
        CapacityError,
    )
    # SageMaker's provisioning failure is capacity (retryable, counted against the spot budget), not a bug
    provisioning = error_for_terminal_state(
        {
            **base,
            "TrainingJobStatus": "Failed",
            "FailureReason": "CapacityError: Unable to provision requested ML compute capacity. Please retry.",
        }
    )
    assert type(provisioning) is CapacityError
    assert str(provisioning).startswith("Training job j could not get capacity (Failed, None)")
    stopped = error_for_terminal_state({**base, "TrainingJobStatus": "Stopped"}, stop_requested=True)
    assert "stopped on request" in str(stopped) and stopped.status == "Stopped"


def test_permission_error_names_action_resource_permission() -> None:
    class Exc(Exception):
        response = {
            "Error": {
                "Code": "AccessDeniedException",
                "Message": "User: arn:aws:sts::1:assumed-role/r/x is not authorized to perform: iam:PassRole on "
                "resource: arn:aws:iam::1:role/SageMakerRole",
            }
        }

    err = permission_error(
        Exc(), operation="CreateTrainingJob", resource="arn:...:training-job/j", conn_id="aws_default"
    )
    assert isinstance(err, AwsPermissionError)
    assert "needs the IAM permission iam:PassRole on arn:aws:iam::1:role/SageMakerRole" in str(err)
    assert "CreateTrainingJob" in str(err) and "aws_default" in str(err)


def test_merge_log_events_orders_by_timestamp_across_hosts() -> None:
    a = [LogEvent(1, "j/algo-1", "a1"), LogEvent(5, "j/algo-1", "a5")]
    b = [LogEvent(2, "j/algo-2", "b2"), LogEvent(5, "j/algo-2", "b5")]
    assert [e.message for e in merge_log_events([a, b])] == ["a1", "b2", "a5", "b5"]


def test_links_point_at_console_logs_and_s3() -> None:
    links = job_links(
        {"region": "eu-west-1", "job_name": "j-1", "output_uri": "s3://b/out", "checkpoint_uri": "s3://b/ck/"}
    )
    assert (
        links["job"] == "https://eu-west-1.console.aws.amazon.com/sagemaker/home?region=eu-west-1#/jobs/j-1"
    )
    assert "logStreamNameFilter" in links["logs"] and "TrainingJobs" in links["logs"]
    assert links["output"] == "https://s3.console.aws.amazon.com/s3/buckets/b?region=eu-west-1&prefix=out/"
    assert links["checkpoints"].endswith("prefix=ck/")


def test_operator_constructor_is_cheap_and_templated() -> None:
    from airflow_dist_training.operators.training import DistributedTrainingOperator

    op = DistributedTrainingOperator(task_id="t", spec="specs/job.yaml")
    assert op.template_fields == ("spec", "channels", "aws_conn_id", "region_name", "warm_start_uri")
    assert op.max_wait_seconds is None and op.deferrable is False
    assert {link.name for link in op.operator_extra_links} == {
        "Training view",
        "SageMaker Training Job",
        "CloudWatch Logs",
        "S3 Output",
        "S3 Checkpoints",
    }
