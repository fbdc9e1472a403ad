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
    import airflow_dist_training.operators.fsx as fsx_ops

    monkeypatch.undo()
    creates = fake.total_creates
    assert fsx_ops.preflight_training_spec.__name__ == "preflight_training_spec"
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


def test_retry_after_failure_creates_r2_and_succeeds(fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    name = make_op().submit_job(make_context())
    fake.set_status(name, "Failed", failure_reason="AlgorithmError: boom")
    fake.complete_after = 0.0
    result = make_op().execute(make_context())
    assert result["job_name"] == f"{name}-r2"
    assert fake.create_log == [name, f"{name}-r2"]


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
    fake: FakeTrainingLifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.complete_after = None
    op = make_op()
    ctx = make_context()
    real_describe = op.hook.describe_training_job_or_none
    # the job appears between our describe and our create (another worker)
    calls = {"n": 0}

    def racing_describe(name: str) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            other = make_op()
            from fake_sagemaker_training import make_request

            other.hook.create_training_job(make_request(name))
            return None
        return real_describe(name)

    monkeypatch.setattr(op.hook, "describe_training_job_or_none", racing_describe)
    op._spec_obj = op._load_spec(ctx)
    name = op.submit_job(ctx)
    assert fake.creates[name] == 1  # our create got ResourceInUse and reattached


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

    from airflow_dist_training.operators.training import StopOrphanedTrainingJobsOperator

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
