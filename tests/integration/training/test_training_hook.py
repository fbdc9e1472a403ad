"""SageMakerTrainingHook against the moto server (with the lifecycle fake)."""

from __future__ import annotations

import gzip
import io
import tarfile
import time
from typing import Any

import pytest
from fake_sagemaker_training import FakeTrainingLifecycle, make_request, seed_logs

from airflow_dist_training.errors import AwsPermissionError, CapacityError, TrainingJobError
from airflow_dist_training.hooks.sagemaker_jobs import JobAlreadyExistsError
from airflow_dist_training.hooks.training import LogCursor, error_for_terminal_state, result_from_description

pytestmark = pytest.mark.integration


def test_create_then_describe_returns_in_progress(hook: Any, fake: FakeTrainingLifecycle) -> None:
    arn = hook.jobs.create(make_request("job-a"))
    assert arn.endswith(":training-job/job-a")
    desc = hook.jobs.describe("job-a")
    assert desc["TrainingJobStatus"] in {"InProgress", "Completed"}
    assert fake.creates["job-a"] == 1


def test_duplicate_create_raises_job_already_exists(hook: Any, fake: FakeTrainingLifecycle) -> None:
    hook.jobs.create(make_request("job-dup"))
    with pytest.raises(JobAlreadyExistsError):
        hook.jobs.create(make_request("job-dup"))
    assert fake.creates["job-dup"] == 1


def test_describe_unknown_job_is_none(hook: Any) -> None:
    assert hook.describe_training_job_or_none("never-created") is None


def test_stop_is_idempotent_and_tags_stop_requested(hook: Any, fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    hook.jobs.create(make_request("job-stop"))
    assert hook.stop_training_job("job-stop") is True
    assert hook.stop_training_job("job-stop") is False  # already Stopped: fine
    desc = hook.jobs.describe("job-stop")
    assert desc["TrainingJobStatus"] == "Stopped"
    assert hook.jobs.stop_requested(desc) is True
    assert fake.stops["job-stop"] == 1
    assert hook.stop_training_job("no-such-job") is False


def test_stopped_outside_airflow_is_a_failure_with_reason(hook: Any, fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    hook.jobs.create(make_request("job-console"))
    fake.set_status("job-console", "Stopped")
    desc = hook.jobs.describe("job-console")
    assert hook.jobs.stop_requested(desc) is False
    err = error_for_terminal_state(desc, stop_requested=False)
    assert type(err) is TrainingJobError
    assert "ended Stopped" in str(err) and "outside Airflow" in str(err)


def test_capacity_failure_is_a_capacity_error(hook: Any, fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    hook.jobs.create(make_request("job-cap"))
    fake.set_status(
        "job-cap", "Failed", failure_reason="InsufficientCapacityError: not enough ml.p4d.24xlarge"
    )
    err = error_for_terminal_state(hook.jobs.describe("job-cap"))
    assert isinstance(err, CapacityError)
    assert err.failure_reason and "InsufficientCapacityError" in err.failure_reason


def test_access_denied_names_action_resource_and_permission(hook: Any, fake: FakeTrainingLifecycle) -> None:
    fake.deny = {"CreateTrainingJob"}
    with pytest.raises(AwsPermissionError) as info:
        hook.jobs.create(make_request("job-denied"))
    text = str(info.value)
    assert "CreateTrainingJob" in text
    assert "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-denied" in text
    assert "needs the IAM permission sagemaker:CreateTrainingJob" in text
    assert fake.total_creates == 0


def test_describe_survives_throttling_on_half_the_calls(hook: Any, fake: FakeTrainingLifecycle) -> None:
    hook.jobs.create(make_request("job-throttle"))
    fake.throttle_every = 2
    for _ in range(6):
        assert hook.jobs.describe("job-throttle")["TrainingJobName"] == "job-throttle"
    assert fake.throttled >= 3


def test_logs_merge_all_hosts_beyond_50_streams(hook: Any, boto: Any, fake: FakeTrainingLifecycle) -> None:
    seed_logs(boto.logs, "big-job", hosts=60, lines_per_host=3)
    cursor = LogCursor()
    events = hook.fetch_log_events("big-job", cursor)
    assert len(events) == 180
    assert len({e.stream for e in events}) == 60
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
    assert events[0].format() == "[algo-1-1712345678] host 1 line 0"
    # resumable: nothing new, then only the new line
    assert hook.fetch_log_events("big-job", cursor) == []
    boto.logs.put_log_events(
        logGroupName="/aws/sagemaker/TrainingJobs",
        logStreamName="big-job/algo-7-1712345678",
        logEvents=[{"timestamp": int(time.time() * 1000), "message": "late line"}],
    )
    assert [e.message for e in hook.fetch_log_events("big-job", cursor)] == ["late line"]


def test_stop_is_idempotent(hook: Any, fake: FakeTrainingLifecycle) -> None:
    # what the trigger's on_kill runs (in a thread): a second stop sends nothing
    fake.complete_after = None
    hook.jobs.create(make_request("async-stop"))
    assert hook.stop_training_job("async-stop") is True
    assert hook.stop_training_job("async-stop") is False
    assert fake.stops["async-stop"] == 1


def test_result_from_description_is_plain_json(hook: Any, fake: FakeTrainingLifecycle) -> None:
    import json

    hook.jobs.create(make_request("res-job"))
    desc = hook.jobs.wait("res-job", poll_interval=0.01)
    result = result_from_description(desc)
    assert json.loads(json.dumps(result)) == result
    assert result["status"] == "Completed"
    assert result["model_artifact_uri"] == "s3://out-bucket/models/res-job/output/model.tar.gz"
    assert result["checkpoint_uri"] == "s3://out-bucket/checkpoints/x"
    assert result["final_metrics"] == {"loss": 0.125}
    assert result["billable_seconds"] == 42
    assert [t["status"] for t in result["timeline"]] == [
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]


def test_upload_code_packs_source_dir(hook: Any, boto: Any, tmp_path: Any) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    (tmp_path / "src" / "pkg").mkdir()
    (tmp_path / "src" / "pkg" / "util.py").write_text("X = 1\n")
    boto.s3.create_bucket(Bucket="code-bucket")
    hook.upload_code(tmp_path / "src", "s3://code-bucket/jobs/j/source/sourcedir.tar.gz")
    body = boto.s3.get_object(Bucket="code-bucket", Key="jobs/j/source/sourcedir.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(body))) as tar:
        assert sorted(tar.getnames()) == ["pkg", "pkg/util.py", "train.py"]
