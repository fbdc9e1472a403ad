"""Pure parts of the training hook/operator/links: no AWS, no Airflow DB."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

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


class _TI:
    """A task instance's own XComs, as the task's resumes after a deferral see them."""

    def __init__(self) -> None:
        self.map_index = -1
        self.xcoms: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value", **_: object) -> object:
        assert task_ids == "train"
        return self.xcoms.get(key)


def test_the_result_says_where_the_job_resumed_even_when_another_worker_finishes_the_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the launch pushed (``resumed_from``) reaches the result of a later resume (after a
    deferral): for the job it was pushed for only."""
    from airflow_dist_training.operators.training import RESUMED_FROM_XCOM_KEY, DistributedTrainingOperator

    ti = _TI()
    ti.xcom_push(
        RESUMED_FROM_XCOM_KEY,
        {"job_name": "demo-2", "step": 7, "checkpoint_uri": "s3://b/c/step-000000000007/",
         "after": "a spot interruption of job demo-1"},
    )  # fmt: skip
    described = {
        "TrainingJobName": "demo-2",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/demo-2",
        "TrainingJobStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/o/demo-2/output/model.tar.gz"},
    }
    resumed = DistributedTrainingOperator(
        task_id="train", spec="job.yaml", backend="sagemaker", aws_conn_id=None
    )
    monkeypatch.setattr(resumed.training_backend.jobs, "describe_or_none", lambda name: {**described, "TrainingJobName": name})
    result = resumed.execute_complete({"ti": ti}, {"job_name": "demo-2", "status": "success"})  # type: ignore[arg-type]
    assert result["resumed_from"] == {
        "step": 7,
        "checkpoint_uri": "s3://b/c/step-000000000007/",
        "after": "a spot interruption of job demo-1",
    }
    # a record of another job of the run (an earlier generation's) is not this job's
    other = DistributedTrainingOperator(
        task_id="train", spec="job.yaml", backend="sagemaker", aws_conn_id=None
    )
    monkeypatch.setattr(other.training_backend.jobs, "describe_or_none", lambda name: {**described, "TrainingJobName": name})
    later = other.execute_complete({"ti": ti}, {"job_name": "demo-3", "status": "success"})  # type: ignore[arg-type]
    assert later["resumed_from"] is None


def test_the_task_log_repeats_the_jobs_last_lines_that_the_trigger_handed_over(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """A triggerer may drop a trigger's final log lines (apache/airflow#66158): the task log still
    ends with the job's, from the terminal event, labelled."""
    from airflow_dist_training.operators.training import JOB_LAST_LINE, DistributedTrainingOperator

    described = {
        "TrainingJobName": "demo-2",
        "TrainingJobStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/o/demo-2/output/model.tar.gz"},
    }
    op = DistributedTrainingOperator(task_id="train", spec="job.yaml", backend="sagemaker", aws_conn_id=None)
    monkeypatch.setattr(op.training_backend.jobs, "describe_or_none", lambda name: described)
    lines = ["[algo-1] 2026-12-07T10:00:01.000+00:00 epoch=1", "[algo-1] 2026-12-07T10:00:02.000+00:00 done"]
    op.execute_complete({"ti": _TI()}, {"job_name": "demo-2", "status": "success", "last_lines": lines})  # type: ignore[arg-type]
    out = capfd.readouterr()
    shown = [line for line in (out.out + out.err).splitlines() if JOB_LAST_LINE in line]
    assert len(shown) == 2 and all(f"{JOB_LAST_LINE} {line}" in row for line, row in zip(lines, shown, strict=True)), shown


def test_the_sensor_and_the_orphan_stop_reach_the_backend_they_name_through_the_registry() -> None:
    """No hard-coded SageMaker: a backend registered by name (here, in the test) is the one the
    sensor reads the job from and the teardown stops the run's jobs on."""
    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.job_states import JobPhase, JobStatus
    from airflow_dist_training.operators.orphaned_jobs import StopOrphanedTrainingJobsOperator
    from airflow_dist_training.sensors.training import TrainingJobSensor
    from airflow_dist_training.spec.backends import BackendRecord, forget_backend, register_backend

    asked: list[tuple[str, str]] = []

    class Ledger:
        def __init__(self, *, record: BackendRecord, **_: Any) -> None:
            self.record = record

        def status(self, job_name: str) -> JobStatus:
            asked.append(("status", job_name))
            return JobStatus(name=job_name, phase=JobPhase.COMPLETED, state="done", detail={})

        def result_of(self, status: JobStatus) -> dict[str, Any]:
            return {"job_name": status.name, "backend": self.record.name}

        def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
            asked.append(("stop_run_jobs", run_hash))
            return [f"ledger-{run_hash}"]

    register_backend(
        BackendRecord(name="ledger", factory=Ledger, staging="directory", evaluation="process",
                      default_registry="local", durable=True, on_aws=False)
    )  # fmt: skip
    try:
        done = TrainingJobSensor(task_id="watch", job_name="j-1", backend="ledger").poke(
            {"ti": _TI(), "run_id": "manual__1"}  # type: ignore[arg-type]
        )
        assert done.xcom_value == {"job_name": "j-1", "backend": "ledger"}  # type: ignore[union-attr]
        from airflow_dist_training.operators import training

        assert training.StopOrphanedTrainingJobsOperator is StopOrphanedTrainingJobsOperator  # its public home of old
        stop = StopOrphanedTrainingJobsOperator(task_id="stop", training_task_id="train", backend="ledger")
        stopped = stop.execute({"ti": _TI(), "run_id": "manual__1"})  # type: ignore[arg-type]
        assert stopped == [f"ledger-{asked[-1][1]}"] and asked[0] == ("status", "j-1")
        assert asked[-1][0] == "stop_run_jobs"
        with pytest.raises(SpecValidationError, match="ledger2"):
            TrainingJobSensor(task_id="w2", job_name="j", backend="ledger2")
    finally:
        forget_backend("ledger")
