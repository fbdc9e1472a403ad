"""FSxDataRepositoryTaskTrigger against the moto server (aiobotocore) with the FSx fake."""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import pytest
from fake_fsx import FakeFSx

from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.triggers.fsx import FSxDataRepositoryTaskTrigger

pytestmark = pytest.mark.integration


def _task(fake: FakeFSx, **plan: Any) -> str:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    fsx = boto3.client("fsx", region_name="us-east-1")
    fs_id = fsx.create_file_system(FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet])[
        "FileSystem"
    ]["FileSystemId"]
    fake.plan_next_task(**plan)
    return fsx.create_data_repository_task(
        Type="RELEASE_DATA_FROM_FILESYSTEM",
        FileSystemId=fs_id,
        Paths=["data"],
        Report={
            "Enabled": True,
            "Path": "s3://bucket/reports",
            "Format": "REPORT_CSV_20191124",
            "Scope": "FAILED_FILES_ONLY",
        },
    )["DataRepositoryTask"]["TaskId"]


def _trigger(task_id: str, **kw: Any) -> FSxDataRepositoryTaskTrigger:
    return FSxDataRepositoryTaskTrigger(
        fsx_task_id=task_id,
        poll_interval=0.01,
        aws_conn_id=None,
        region_name="us-east-1",
        botocore_config={"retries": {"total_max_attempts": 1}},
        **kw,
    )


def test_serialize_round_trip() -> None:
    trigger = _trigger("task-0123456789abcdef0", max_attempts=5)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_dist_training.triggers.fsx.FSxDataRepositoryTaskTrigger"
    assert FSxDataRepositoryTaskTrigger(**kwargs).serialize() == (classpath, kwargs)


@pytest.mark.asyncio
async def test_trigger_success_logs_progress_and_released_capacity(server_fsx: FakeFSx, capsys: Any) -> None:
    task_id = _task(server_fsx, total=10, released_bytes=3 * 1024**3, executing_polls=3)
    event = await asyncio.wait_for(_trigger(task_id).run().__anext__(), timeout=60)
    assert event.payload["status"] == "success"
    assert event.payload["progress"]["released_bytes"] == 3 * 1024**3
    assert event.payload["message"] == (
        f"FSx task {task_id} (RELEASE_DATA_FROM_FILESYSTEM) SUCCEEDED: 10/10 succeeded, 0 failed, released 3.0 GiB"
    )
    logged = capsys.readouterr().out
    assert "EXECUTING: 0/10 succeeded" in logged and "EXECUTING: 1/10 succeeded" in logged


@pytest.mark.asyncio
async def test_trigger_failure_points_to_report(server_fsx: FakeFSx) -> None:
    task_id = _task(server_fsx, outcome="FAILED", total=4, failed=1, failure_message="1 file failed")
    event = await asyncio.wait_for(_trigger(task_id).run().__anext__(), timeout=60)
    assert event == TriggerEvent(
        {
            "status": "failed",
            "fsx_task_id": task_id,
            "progress": event.payload["progress"],
            "message": f"FSx data repository task {task_id} ended FAILED: 1 file failed (3/4 succeeded, 1 failed). "
            f"Completion report (failed files): s3://bucket/reports/{task_id}/",
        }
    )


@pytest.mark.asyncio
async def test_trigger_times_out(server_fsx: FakeFSx) -> None:
    task_id = _task(server_fsx, executing_polls=100)
    event = await asyncio.wait_for(_trigger(task_id, max_attempts=3).run().__anext__(), timeout=60)
    assert event.payload["status"] == "timeout"


# --- file-system creation ---------------------------------------------------------------------------


def _create_operator(**kw: Any) -> Any:
    from airflow_dist_training.operators.fsx import FSxCreateFileSystemOperator

    ec2 = boto3.client("ec2", region_name="us-east-1")
    subnet = ec2.describe_subnets()["Subnets"][0]
    group = ec2.create_security_group(GroupName="fsx", Description="lustre", VpcId=subnet["VpcId"])["GroupId"]
    return FSxCreateFileSystemOperator(
        task_id="create_fsx",
        subnet_id=subnet["SubnetId"],
        security_group_ids=[group],
        aws_conn_id=None,
        region_name="us-east-1",
        poll_interval=0.01,
        **kw,
    )


class _TI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.mark.asyncio
async def test_deferrable_create_waits_in_the_triggerer_until_available(
    server_fsx: FakeFSx, capsys: Any
) -> None:
    from airflow_dist_training.compat import TaskDeferred
    from airflow_dist_training.triggers.fsx import FSxFileSystemAvailableTrigger

    server_fsx.creating_describes = 3
    op = _create_operator(deferrable=True)
    context = {"ti": _TI(), "run_id": "r1"}
    with pytest.raises(TaskDeferred) as info:
        op.execute(context)  # type: ignore[arg-type]
    trigger = info.value.trigger
    assert isinstance(trigger, FSxFileSystemAvailableTrigger)
    assert info.value.method_name == "execute_complete"
    classpath, kwargs = trigger.serialize()
    assert FSxFileSystemAvailableTrigger(**kwargs).serialize() == (classpath, kwargs)
    event = await asyncio.wait_for(trigger.run().__anext__(), timeout=60)
    fs_id = trigger.file_system_id
    assert event.payload == {
        "status": "success",
        "file_system_id": fs_id,
        "lifecycle": "AVAILABLE",
        "message": f"file system {fs_id} is AVAILABLE",
    }
    logged = capsys.readouterr().out
    assert f"File system {fs_id} is CREATING" in logged and f"File system {fs_id} is AVAILABLE" in logged
    summary = op.execute_complete(context, event.payload)  # type: ignore[arg-type]
    assert summary["file_system_id"] == fs_id and summary["mount_name"]
    assert context["ti"].pushed["file_system_id"] == fs_id


@pytest.mark.asyncio
async def test_a_failed_file_system_ends_the_wait_with_its_reason(server_fsx: FakeFSx) -> None:
    from airflow_dist_training.compat import TaskDeferred

    server_fsx.creating_describes = 100
    op = _create_operator(deferrable=True)
    with pytest.raises(TaskDeferred) as info:
        op.execute({"ti": _TI(), "run_id": "r2"})  # type: ignore[arg-type]
    fs_id = info.value.trigger.file_system_id
    server_fsx._creating.pop(fs_id)
    server_fsx.set_file_system(
        fs_id, Lifecycle="FAILED", FailureDetails={"Message": "subnet has no free IPs"}
    )
    event = await asyncio.wait_for(info.value.trigger.run().__anext__(), timeout=60)
    assert event.payload["status"] == "failed"
    assert event.payload["message"] == f"file system {fs_id} is FAILED: subnet has no free IPs"
    with pytest.raises(RuntimeError, match="subnet has no free IPs"):
        op.execute_complete({}, event.payload)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_file_system_wait_times_out(server_fsx: FakeFSx) -> None:
    from airflow_dist_training.compat import TaskDeferred

    server_fsx.creating_describes = 100
    op = _create_operator(deferrable=True, timeout=0.03)  # 3 polls of 0.01 s
    with pytest.raises(TaskDeferred) as info:
        op.execute({"ti": _TI(), "run_id": "r3"})  # type: ignore[arg-type]
    assert info.value.trigger.max_attempts == 3
    event = await asyncio.wait_for(info.value.trigger.run().__anext__(), timeout=60)
    assert event.payload["status"] == "timeout"
    assert event.payload["message"].endswith("not AVAILABLE after 3 polls (CREATING)")
