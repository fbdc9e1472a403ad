"""DistributedTrainingOperator against the moto server: durable submit, terminal states, errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from unittest import mock

import pytest
from fake_sagemaker_training import FakeTrainingLifecycle, make_context, spec_dict

# no task_state_store before Airflow 3.3: the fallback persists nothing (docs/compatibility.md)
from airflow_dist_training.compat import HAS_RESUMABLE_JOBS
from airflow_dist_training.errors import (
    AwsPermissionError,
    CapacityError,
    SpecValidationError,
    TrainingJobError,
)
from airflow_dist_training.operators.training import DistributedTrainingOperator, lineage_datasets

pytestmark = pytest.mark.integration


def make_op(**kwargs: Any) -> DistributedTrainingOperator:
    kwargs.setdefault("spec", spec_dict())
    kwargs.setdefault("deferrable", False)
    op = DistributedTrainingOperator(
        task_id="train",
        aws_conn_id=None,
        region_name="us-east-1",
        poll_interval=0.01,
        **kwargs,
    )
    op.hook.throttle_base_delay = 0.01
    return op


def test_completed_job_result_goes_to_xcom(fake: FakeTrainingLifecycle) -> None:
    ctx = make_context()
    result = make_op().execute(ctx)
    assert fake.total_creates == 1
    name = fake.create_log[0]
    assert name.startswith("llm-finetune-") and len(name) == len("llm-finetune-") + 10
    assert result["job_name"] == name and result["status"] == "Completed"
    assert result["model_artifact_uri"] == f"s3://my-ml-bucket/output/{name}/output/model.tar.gz"
    assert result["checkpoint_uri"] == "s3://my-ml-bucket/checkpoints/llm-finetune"
    assert result["final_metrics"] == {"loss": 0.125}
    assert json.loads(json.dumps(result)) == result  # plain JSON, no datetimes
    assert ctx["task_state_store"].data == ({"sagemaker_training_job_name": name} if HAS_RESUMABLE_JOBS else {})
    assert ctx["ti"].xcom["sagemaker_training_job"]["job_name"] == name
    job = fake.job(name)
    assert {"Key": "airflow-dist-training:run-identity", "Value": name.split("-")[-1]} in job.tags


def test_fsx_channel_preflight_runs_before_create_training_job(
    fake: FakeTrainingLifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_op().execute(make_context())
    assert fake.fsx_preflights == ["llm-finetune"]  # type: ignore[attr-defined]
    # the real pre-flight: the spec's file system does not exist, so nothing is created
    import airflow_dist_training.fsx.preflight as fsx_preflight

    monkeypatch.undo()
    creates = fake.total_creates
    assert fsx_preflight.preflight_training_spec.__name__ == "preflight_training_spec"
    with pytest.raises(
        SpecValidationError,
        match=r"channels\.extra\.file_system_id: file system fs-0123456789abcdef0 does not exist",
    ):
        make_op().execute(make_context(run_id="manual__2"))
    assert fake.total_creates == creates


def test_retry_after_crash_before_persist_reattaches(fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    first = make_op()
    ctx = make_context()
    name = first.submit_job(ctx)  # created, but "crashed" before task_state_store.set
    assert ctx["task_state_store"].data == {}
    fake.complete_after = 0.0
    result = make_op().execute(make_context())  # a retry: new store, same run identity
    assert result["job_name"] == name
    assert fake.total_creates == 1


def test_retry_of_completed_job_returns_it_without_creating(fake: FakeTrainingLifecycle) -> None:
    ctx = make_context()
    r1 = make_op().execute(ctx)
    retry_ctx = make_context(store=ctx["task_state_store"])  # a new try: earlier XComs are cleared
    r2 = make_op().execute(retry_ctx)
    r3 = make_op().execute(make_context())
    assert r1["job_name"] == r2["job_name"] == r3["job_name"]
    assert fake.total_creates == 1
    # the retry still shows the job's links
    assert retry_ctx["ti"].xcom["sagemaker_training_job"] == ctx["ti"].xcom["sagemaker_training_job"]


def test_failed_job_raises_failure_reason(fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    name = op.submit_job(ctx)
    fake.set_status(name, "Failed", failure_reason="AlgorithmError: CUDA out of memory")
    with pytest.raises(TrainingJobError, match="AlgorithmError: CUDA out of memory") as info:
        op.poll_until_complete(name, ctx)
    assert info.value.status == "Failed" and not isinstance(info.value, CapacityError)
    assert info.value.failure_reason == "AlgorithmError: CUDA out of memory"
    assert fake.total_creates == 1


def test_retry_after_failure_creates_r2_and_succeeds(
    fake: FakeTrainingLifecycle, capfd: pytest.CaptureFixture[str]
) -> None:
    fake.complete_after = None
    name = make_op().submit_job(make_context())
    fake.set_status(name, "Failed", failure_reason="AlgorithmError: boom")
    fake.complete_after = 0.0
    result = make_op().execute(make_context())
    assert result["job_name"] == f"{name}-r2"
    assert fake.create_log == [name, f"{name}-r2"]
    # without a resume policy Airflow need not reach the checkpoints (no bucket here): it says so
    assert (
        "Could not check the checkpoints under s3://my-ml-bucket/checkpoints/llm-finetune before relaunching "
        "the run (uri: s3://my-ml-bucket/checkpoints/llm-finetune/: bucket my-ml-bucket does not exist)"
    ) in capfd.readouterr().out


def test_a_retry_with_the_default_policy_never_resumes_a_partial_checkpoint(
    fake: FakeTrainingLifecycle, tmp_path: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    """No ``checkpoint_resume`` (the default): the run's jobs checkpoint at the spec's own location,
    which SageMaker restores into the retry's job. The job before it was killed while it saved
    ``checkpoint-1000``: the retry moves it aside and resumes from ``checkpoint-500``."""
    import boto3

    from airflow_dist_training.storage import local_files
    from tests import checkpoint_layouts as w

    w.write_hf(tmp_path, 500)
    w.write_hf(tmp_path, 1000, drop=("optimizer.pt", "scheduler.pt"))  # killed mid-save
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="my-ml-bucket")
    for path, rel in local_files(tmp_path):
        s3.put_object(Bucket="my-ml-bucket", Key=f"checkpoints/llm-finetune/{rel}", Body=path.read_bytes())
    fake.complete_after = None
    name = make_op().submit_job(make_context())
    assert capfd.readouterr().out.count("Moved the incomplete checkpoint") == 0  # the run's first job
    fake.set_status(name, "Failed", failure_reason="AlgorithmError: killed")
    fake.complete_after = 0.0
    result = make_op().execute(make_context())
    assert fake.create_log == [name, f"{name}-r2"]
    root = "s3://my-ml-bucket/checkpoints/llm-finetune"
    out = capfd.readouterr().out
    moved = f"Moved the incomplete checkpoint {root}/checkpoint-1000/ aside to {root}/_incomplete/checkpoint-1000/"
    assert moved in out
    assert "this run's own" not in out
    assert f"Resuming from the checkpoint {root}/checkpoint-500/ (hf-trainer, step 500) in the spec's" in out
    listed = s3.list_objects_v2(Bucket="my-ml-bucket", Prefix="checkpoints/llm-finetune/")["Contents"]
    folders = {obj["Key"].split("/")[2] for obj in listed}
    assert folders == {"checkpoint-500", "_incomplete"}  # what the retry's job gets restored
    assert result["resumed_from"]["step"] == 500, result


@pytest.mark.parametrize(
    ("status", "reason", "error", "text"),
    [
        ("Stopped", None, TrainingJobError, "outside Airflow"),
        ("MaxRuntimeExceeded", "MaxRuntimeExceeded: job ran 86400s", TrainingJobError, "MaxRuntimeExceeded"),
        ("Failed", "InsufficientCapacityError: no p4d capacity", CapacityError, "could not get capacity"),
    ],
)
def test_terminal_states_are_failures(
    fake: FakeTrainingLifecycle, status: str, reason: str | None, error: type, text: str
) -> None:
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    name = op.submit_job(ctx)
    ctx["task_state_store"].set(op.external_id_key, name)
    fake.set_status(name, status, failure_reason=reason)
    with pytest.raises(error, match=text):
        op.poll_until_complete(name, ctx)


def test_on_kill_stops_job_and_stop_is_not_success(fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    name = op.submit_job(ctx)
    op.on_kill()
    assert fake.stops[name] == 1
    with pytest.raises(TrainingJobError, match="stopped on request") as info:
        op.poll_until_complete(name, ctx)
    assert info.value.status == "Stopped"


def test_max_wait_is_the_only_cap_and_stops_the_job(fake: FakeTrainingLifecycle) -> None:
    from airflow_dist_training.compat import AirflowException

    fake.complete_after = None
    op = make_op(max_wait_seconds=0.05)
    with pytest.raises(AirflowException, match=r"max_wait_seconds=0\.05.*stopped"):
        op.execute(make_context())
    assert fake.stops[fake.create_log[0]] == 1


def test_bad_spec_fails_before_any_aws_call(fake: FakeTrainingLifecycle) -> None:
    bad = spec_dict(compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 0})
    with pytest.raises(SpecValidationError, match=r"compute.instance_count"):
        make_op(spec=bad).execute(make_context())
    no_role = spec_dict()
    del no_role["role_arn"]
    with pytest.raises(SpecValidationError, match=r"role_arn: is required for SageMaker jobs"):
        make_op(spec=no_role).execute(make_context())
    assert fake.describes == 0 and fake.total_creates == 0


def test_access_denied_on_create_names_permission(fake: FakeTrainingLifecycle) -> None:
    fake.deny = {"CreateTrainingJob"}
    with pytest.raises(
        AwsPermissionError,
        match=r"needs the IAM permission sagemaker:CreateTrainingJob on arn:aws:sagemaker:us-east-1:123456789012:training-job/llm-finetune-",
    ):
        make_op().execute(make_context())


def test_task_succeeds_with_throttling_on_half_the_describes(fake: FakeTrainingLifecycle) -> None:
    fake.throttle_every = 2
    fake.complete_after = 0.3  # several polls
    result = make_op().execute(make_context())
    assert result["status"] == "Completed"
    assert fake.throttled >= 1 and fake.throttled == fake.describes // 2


def test_resource_in_use_on_create_reattaches(
    fake: FakeTrainingLifecycle, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    jobs = op.training_backend.jobs  # what the find path describes through
    real_describe = jobs.describe_or_none
    # the job appears between our describe and our create (another worker)
    raced: list[str] = []

    def racing_describe(name: str) -> Any:
        if not raced:
            from fake_sagemaker_training import make_request

            make_op().training_backend.jobs.create(make_request(name))
            raced.append(name)
            return None
        return real_describe(name)

    monkeypatch.setattr(jobs, "describe_or_none", racing_describe)
    name = op.submit_job(ctx)
    assert raced == [name]  # the other worker's create came between our describe and our create
    assert fake.creates[name] == 1  # our create got ResourceInUse and reattached
    assert f"{name} appeared concurrently (ResourceInUse): reattaching." in capfd.readouterr().out


def test_secret_environment_values_are_masked(fake: FakeTrainingLifecycle) -> None:
    from airflow.sdk.log import mask_secret  # noqa: F401

    from airflow_dist_training.operators.training import mask_spec_secrets

    assert mask_spec_secrets(spec_dict()) == ["WANDB_API_KEY"]
    from airflow.sdk._shared.secrets_masker import redact

    assert "s3cr3t-wandb-value" not in str(redact("key is s3cr3t-wandb-value"))


def test_lineage_datasets_cover_s3_fsx_and_model() -> None:
    request = {
        "InputDataConfig": [
            {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://b/datasets/train/"}}},
            {
                "ChannelName": "extra",
                "DataSource": {
                    "FileSystemDataSource": {
                        "FileSystemId": "fs-0123456789abcdef0",
                        "FileSystemType": "FSxLustre",
                        "DirectoryPath": "/abcdefgh/data",
                    }
                },
            },
            {
                "ChannelName": "code",
                "DataSource": {"S3DataSource": {"S3Uri": "s3://b/code/sourcedir.tar.gz"}},
            },
        ]
    }
    desc = {"ModelArtifacts": {"S3ModelArtifacts": "s3://b/output/j/output/model.tar.gz"}}
    inputs, outputs = lineage_datasets(request, desc)
    assert inputs == [("s3://b", "datasets/train/"), ("fsx://fs-0123456789abcdef0", "/abcdefgh/data")]
    assert outputs == [("s3://b", "output/j/output/model.tar.gz")]


def test_deferrable_operator_defers_without_a_cap(fake: FakeTrainingLifecycle) -> None:
    from airflow_dist_training.compat import TaskDeferred

    fake.complete_after = None
    op = make_op(deferrable=True)
    ctx = make_context()
    with pytest.raises(TaskDeferred) as info:
        op.execute(ctx)
    kwargs = info.value.trigger.serialize()[1]
    assert kwargs["job_name"] == fake.create_log[0] and kwargs["max_wait_seconds"] is None
    assert ctx["task_state_store"].data.get(op.external_id_key) == (fake.create_log[0] if HAS_RESUMABLE_JOBS else None)
    # resume on another worker: only the event is used
    fake.set_status(fake.create_log[0], "Completed")
    result = make_op(deferrable=True).execute_complete(
        make_context(), event={"status": "success", "job_name": kwargs["job_name"]}
    )
    assert result["status"] == "Completed"


@pytest.mark.asyncio
async def test_execution_timeout_applies_while_deferred_and_stops_the_job(
    fake: FakeTrainingLifecycle,
) -> None:
    from datetime import UTC, datetime, timedelta

    from airflow_dist_training.compat import AirflowException, TaskDeferred

    fake.complete_after = None
    op = make_op(deferrable=True, execution_timeout=timedelta(seconds=30))
    ctx = make_context()
    ctx["ti"].start_date = datetime.now(UTC) - timedelta(seconds=31)  # the task started 31 s ago
    with pytest.raises(TaskDeferred) as info:
        op.execute(ctx)
    trigger = info.value.trigger
    assert trigger.deadline == pytest.approx(ctx["ti"].start_date.timestamp() + 30)
    assert trigger.deadline_reason == "execution_timeout=30s"
    events = trigger.run()
    try:
        event = await asyncio.wait_for(events.__anext__(), timeout=30)
    finally:
        await events.aclose()
    name = fake.create_log[0]
    assert event.payload["status"] == "timeout"
    assert event.payload["message"] == (
        f"Training job {name} still InProgress after execution_timeout=30s; the job was not stopped."
    )
    with pytest.raises(AirflowException, match=r"execution_timeout=30s.*the job was stopped"):
        make_op(deferrable=True).execute_complete(make_context(), event=event.payload)
    assert fake.stops[name] == 1


# --- spot interruptions: their own budget, then on-demand ----------------------------------------

SPOT = {"enabled": True, "max_wait_seconds": 172800}


def interrupt_first_jobs(fake: FakeTrainingLifecycle, count: int) -> None:
    """The first ``count`` jobs created lose their spot capacity for good (MaxWaitTimeExceeded)."""

    def on_create(name: str) -> None:
        if len(fake.create_log) <= count:
            fake.set_status(
                name,
                "Stopped",
                secondary="MaxWaitTimeExceeded",
                failure_reason="Training job exceeded MaxWaitTimeInSeconds while waiting for spot capacity",
            )

    fake.on_create = on_create


def spot_of(fake: FakeTrainingLifecycle, name: str) -> tuple[bool, dict[str, Any]]:
    job = fake.job(name)
    return bool(job.enable_managed_spot_training), dict(job.stopping_condition)


def test_interrupted_spot_job_is_replaced_in_the_same_try_then_on_demand(
    fake: FakeTrainingLifecycle,
) -> None:
    import airflow_dist_training.spec.loading as loading
    from airflow_dist_training.spec.training import TrainingJobSpec

    interrupt_first_jobs(fake, 2)
    spot = {**SPOT, "max_interruptions": 3, "on_demand_after_interruptions": 2}
    validations, validate = [], loading.validate_model

    def counting(model: Any, *args: Any, **kwargs: Any) -> Any:
        validations.extend([model] if model is TrainingJobSpec else [])
        return validate(model, *args, **kwargs)

    with mock.patch.object(loading, "validate_model", counting):
        result = make_op(spec=spec_dict(spot=spot)).execute(make_context())  # one task try
    assert len(validations) == 1  # the spec, once for the task's three jobs
    first = fake.create_log[0]
    assert fake.create_log == [first, f"{first}-r2", f"{first}-r3"]
    assert result["job_name"] == f"{first}-r3" and result["status"] == "Completed"
    # spot for the first two; after 2 interruptions the third job is on-demand (no MaxWait)
    assert spot_of(fake, first) == (True, {"MaxRuntimeInSeconds": 86400, "MaxWaitTimeInSeconds": 172800})
    assert spot_of(fake, f"{first}-r2")[0] is True
    assert spot_of(fake, f"{first}-r3") == (False, {"MaxRuntimeInSeconds": 86400})
    # every generation of the run shares the run's checkpoint location: each resumes from the last
    locations = {fake.job(n).checkpoint_config["S3Uri"] for n in fake.create_log}
    assert len(locations) == 1


def test_interruption_budget_spent_fails_without_another_job(fake: FakeTrainingLifecycle) -> None:
    from airflow_dist_training.compat import AirflowFailException

    interrupt_first_jobs(fake, 5)
    op = make_op(spec=spec_dict(spot={**SPOT, "max_interruptions": 1}))
    with pytest.raises(
        AirflowFailException,
        match=r"interruption budget exhausted: 2 interruptions > max_interruptions=1 \(spot.max_interruptions\)",
    ):
        op.execute(make_context())
    assert len(fake.create_log) == 2
    # a retry of the task cannot spend more either
    with pytest.raises(AirflowFailException):
        make_op(spec=spec_dict(spot={**SPOT, "max_interruptions": 1})).execute(make_context())
    assert len(fake.create_log) == 2


def test_a_real_failure_is_not_an_interruption(fake: FakeTrainingLifecycle) -> None:
    fake.on_create = lambda name: fake.set_status(name, "Failed", failure_reason="AlgorithmError: NaN loss")
    op = make_op(spec=spec_dict(spot={**SPOT, "max_interruptions": 5}))
    with pytest.raises(TrainingJobError, match="AlgorithmError: NaN loss"):
        op.execute(make_context())
    assert len(fake.create_log) == 1  # the task's retries decide, not the interruption budget


@pytest.mark.parametrize("event", [None, {}, {"status": "success"}])
def test_resumed_without_a_usable_event_reattaches_to_the_runs_job(
    fake: FakeTrainingLifecycle, event: dict[str, Any] | None
) -> None:
    """A try the scheduler failed while it deferred resumes in ``execute_complete`` with no event:
    it waits for the same job again, then takes its result; it never fails for want of an event."""
    from airflow_dist_training.compat import TaskDeferred

    fake.complete_after = None
    ctx = make_context()
    with pytest.raises(TaskDeferred):
        make_op(deferrable=True).execute(ctx)
    (name,) = fake.create_log
    with pytest.raises(TaskDeferred) as info:  # still running: defer again on the same job
        make_op(deferrable=True).execute_complete(make_context(), event=event)
    assert info.value.trigger.job_name == name and fake.create_log == [name]
    fake.set_status(name, "Completed")
    result = make_op(deferrable=True).execute_complete(make_context(), event=event)
    assert result["job_name"] == name and result["status"] == "Completed"
    assert fake.create_log == [name] and sum(fake.stops.values()) == 0


def test_deferred_interrupted_job_defers_again_on_the_next_job(fake: FakeTrainingLifecycle) -> None:
    from airflow_dist_training.compat import TaskDeferred

    fake.complete_after = None
    op = make_op(spec=spec_dict(spot=SPOT), deferrable=True)
    ctx = make_context()
    with pytest.raises(TaskDeferred):
        op.execute(ctx)
    first = fake.create_log[0]
    fake.set_status(first, "Stopped", secondary="MaxWaitTimeExceeded")
    resumed = make_op(spec=spec_dict(spot=SPOT), deferrable=True)  # another worker resumes
    with pytest.raises(TaskDeferred) as info:
        resumed.execute_complete(ctx, event={"job_name": first, "status": "Stopped"})
    assert fake.create_log == [first, f"{first}-r2"]
    assert info.value.trigger.job_name == f"{first}-r2"
    assert ctx["task_state_store"].data.get(op.external_id_key) == (f"{first}-r2" if HAS_RESUMABLE_JOBS else None)


def test_an_on_demand_job_is_never_replaced_as_interrupted(fake: FakeTrainingLifecycle) -> None:
    interrupt_first_jobs(fake, 1)  # reads like an interruption, but the job did not use spot
    with pytest.raises(TrainingJobError, match="MaxWaitTimeInSeconds"):
        make_op().execute(make_context())
    assert len(fake.create_log) == 1


def test_stop_orphaned_jobs_teardown_stops_only_this_runs_running_jobs(fake: FakeTrainingLifecycle) -> None:
    from airflow.sdk import DAG

    from airflow_dist_training.operators.orphaned_jobs import StopOrphanedTrainingJobsOperator

    fake.complete_after = None
    with DAG("orphans", schedule=None):
        train = make_op()
        stop = StopOrphanedTrainingJobsOperator(
            task_id="stop_orphaned_jobs", training_task_id="train", aws_conn_id=None, region_name="us-east-1"
        )
        train >> stop.as_teardown()
    orphan = train.submit_job(make_context("run_a"))  # left InProgress: its worker died
    other_run = train.submit_job(make_context("run_b"))  # the same task in another DAG run
    assert stop.job_backend.record.name == "sagemaker"  # through the backend, not a hook of its own
    assert stop.execute(make_context("run_a")) == [orphan]
    assert fake.stops == {orphan: 1}
    assert fake.job(other_run).training_job_status == "InProgress"
    assert stop.execute(make_context("run_a")) == []  # nothing left: a no-op
    assert stop.is_teardown and stop.trigger_rule == "all_done_setup_success"


def test_a_rerun_whose_job_the_cleared_try_stops_goes_on_with_the_runs_next_job(fake: FakeTrainingLifecycle) -> None:
    """Clearing a task: the rerun can reattach to the job before the earlier try's ``on_kill``
    (the triggerer cancelling its trigger) stops it. Seen on the production-like stack
    (tests/e2e/prod/test_kill_and_restart.py): the rerun then failed "stopped on request" and used
    up a retry. The stop was not this try's: it goes on with the run's next job instead."""
    import threading
    import time

    fake.complete_after = None
    ctx = make_context()
    name = make_op().submit_job(ctx)
    ctx["task_state_store"].set("sagemaker_training_job_name", name)  # the first try persisted it
    rerun = make_op()

    def earlier_try_killed() -> None:
        deadline = time.monotonic() + 30
        while rerun._job_name != name and time.monotonic() < deadline:  # the rerun reattached
            time.sleep(0.01)
        time.sleep(0.2)
        assert make_op().hook.stop_training_job(name, reason="task killed")
        fake.complete_after = 0.0

    killer = threading.Thread(target=earlier_try_killed)
    killer.start()
    try:
        result = rerun.execute(make_context(store=ctx["task_state_store"]))
    finally:
        killer.join()
    assert fake.job(name).training_job_status == "Stopped"
    assert result["job_name"] == f"{name}-r2" and result["status"] == "Completed"
    assert fake.create_log == [name, f"{name}-r2"]


def test_a_job_this_try_stopped_is_not_replaced(fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    name = op.submit_job(ctx)
    op.on_kill()  # the task is being killed: its own stop
    with pytest.raises(TrainingJobError, match="stopped on request"):
        op.poll_until_complete(name, ctx)
    assert fake.create_log == [name]


class RecordedLog:
    """Stands in for an operator's ``log`` (the Task SDK's structlog logger): the lines, formatted."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _record(self, msg: str, *args: Any, **_: Any) -> None:
        self.lines.append(msg % args if args else msg)

    info = warning = error = debug = _record

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.mark.parametrize(
    ("state", "try_number", "stopped"),
    [
        ("failed", 1, True),  # marked failed: the task will not come back
        ("success", 1, True),  # marked success
        ("up_for_retry", 1, False),  # the scheduler failed the try (missed heartbeat), retries left
        (None, 1, False),  # cleared: the next try reattaches
        ("queued", 1, False),  # the next try is on its way
        ("running", 1, False),  # the worker is going away with retries left: a retry reattaches
        ("running", 2, True),  # ... on the last try: nobody comes back for the job
    ],
)
def test_a_killed_try_stops_its_job_only_when_the_task_will_not_come_back(
    fake: FakeTrainingLifecycle,
    monkeypatch: pytest.MonkeyPatch,
    state: str | None,
    try_number: int,
    stopped: bool,
) -> None:
    """Issue 39: under load the scheduler failed a try that was still submitting (a missed
    heartbeat), the supervisor killed it, and its on_kill stopped a healthy job that the retry then
    had to replace. The task instance's state, read through the Task SDK as the supervisor serves
    it, tells the cases apart."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import TaskStatesResult

    asked: list[Any] = []

    class SupervisorComms:  # the supervisor's side of GetTaskStates, as the task runner sees it
        def send(self, msg: Any) -> TaskStatesResult | None:
            if type(msg).__name__ != "GetTaskStates":
                return None  # the submit path's MaskSecret
            asked.append(msg)
            return TaskStatesResult(task_states={"manual__1": {"train": state}})

    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", SupervisorComms(), raising=False)
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    ctx["ti"] = SimpleNamespace(
        dag_id="d", task_id="train", run_id="manual__1", map_index=-1, try_number=try_number, max_tries=1
    )
    op._try = ctx["ti"]
    name = op.submit_job(ctx)
    log = RecordedLog()
    monkeypatch.setattr(DistributedTrainingOperator, "log", property(lambda self: log))
    op.on_kill()
    assert [(m.dag_id, m.task_ids, m.run_ids) for m in asked] == [("d", ["train"], ["manual__1"])]
    assert fake.stops.get(name, 0) == (1 if stopped else 0)
    verdict = f"stopping {name}" if stopped else f"{name} is left running"
    assert verdict in log.text, log.text
    monkeypatch.undo()
    if not stopped:  # the next try reattaches to the same job, which completes
        fake.complete_after = 0.0
        retry = make_op()
        result = retry.execute(make_context(store=ctx["task_state_store"]))
        assert result["job_name"] == name and result["status"] == "Completed"
        assert fake.create_log == [name]


def test_a_kill_whose_state_cannot_be_read_keeps_the_job_while_retries_are_left(
    fake: FakeTrainingLifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM may land while the task runner holds its comms lock: the read must not hang the
    kill past the supervisor's SIGKILL (5 s), and without an answer only the last try stops."""
    import threading
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner

    held = threading.Event()

    class HeldComms:
        def send(self, msg: Any) -> Any:
            if type(msg).__name__ == "GetTaskStates":
                held.wait(30)  # the lock is held by the interrupted request

    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", HeldComms(), raising=False)
    monkeypatch.setattr("airflow_dist_training.task_kills.WORKER_READ_SECONDS", 0.2)
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    name = op.submit_job(ctx)
    log = RecordedLog()
    monkeypatch.setattr(DistributedTrainingOperator, "log", property(lambda self: log))
    try:
        for try_number, stops in ((1, 0), (2, 1)):
            op._try = SimpleNamespace(
                dag_id="d", task_id="train", run_id="manual__1", map_index=-1, try_number=try_number, max_tries=1
            )
            op.on_kill()
            assert fake.stops.get(name, 0) == stops
        assert "its state was not read within 0.2 s, with retries left" in log.text
        assert "on its last try; stopping" in log.text
    finally:
        held.set()


def test_a_try_past_its_execution_timeout_stops_its_job(fake: FakeTrainingLifecycle) -> None:
    """The task runner calls on_kill while handling AirflowTaskTimeout: the user's bound ends the job."""
    from airflow_dist_training.compat import AirflowTaskTimeout

    fake.complete_after = None
    op = make_op()
    name = op.submit_job(make_context())
    try:
        raise AirflowTaskTimeout()
    except AirflowTaskTimeout:
        op.on_kill()
    assert fake.stops[name] == 1


def test_a_checkpoint_stall_stop_fails_the_training_task_and_starts_no_next_job(
    fake: FakeTrainingLifecycle,
) -> None:
    """``checkpoints.freshness.on_stall: stop``: the alarm task stops the job with the cause
    ``checkpoint-stall``; the training task waiting on it fails without a retry and creates no next
    job (a stop on request it did not make would otherwise be replaced), and says why."""
    import threading
    import time

    from airflow_dist_training.compat import AirflowFailException
    from airflow_dist_training.operators.checkpoints import CheckpointStallAlarmOperator
    from airflow_dist_training.planning import RUN_PLAN_XCOM_KEY

    fake.complete_after = None
    train = make_op()
    ctx = make_context()
    name = train.submit_job(ctx)
    assert train._plan is not None
    plan = train._plan.to_xcom()

    class AlarmTI:
        run_id, map_index = "manual__1", -1

        def xcom_pull(self, task_ids: str, key: str) -> Any:
            return plan if (task_ids, key) == ("plan", RUN_PLAN_XCOM_KEY) else None

    alarm = CheckpointStallAlarmOperator(
        task_id="watch_checkpoints",
        plan_task_id="plan",
        training_task_id="train",
        max_age_seconds=60,
        on_stall="stop",
        aws_conn_id=None,
        region_name="us-east-1",
    )
    stall = {"status": "stalled", "job_name": name, "message": f"Checkpoint stall: training job {name} ..."}
    raised: list[BaseException] = []

    def alarm_fires() -> None:
        deadline = time.monotonic() + 30
        while train._job_name != name and time.monotonic() < deadline:  # the training task waits on it
            time.sleep(0.01)
        try:
            alarm.execute_complete({"ti": AlarmTI()}, stall)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=alarm_fires)
    thread.start()
    try:
        with pytest.raises(AirflowFailException, match="stopped by the run's checkpoint-stall alarm"):
            train.execute(make_context(store=ctx["task_state_store"]))
    finally:
        thread.join()
    [alarmed] = raised
    assert isinstance(alarmed, AirflowFailException) and str(alarmed).endswith("Stop requested.")
    assert fake.stops == {name: 1} and fake.job(name).training_job_status == "Stopped"
    assert fake.create_log == [name]  # no next generation
