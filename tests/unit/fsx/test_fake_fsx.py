"""The fake itself: moto gaps filled, requests validated against botocore's fsx model."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from fake_fsx import FakeFSx


def test_file_system_gains_lifecycle_mount_name_and_enis(world: dict[str, Any]) -> None:
    fs = boto3.client("fsx", region_name="us-east-1").describe_file_systems(FileSystemIds=[world["fs_id"]])
    fs = fs["FileSystems"][0]
    assert fs["Lifecycle"] == "AVAILABLE"
    assert fs["LustreConfiguration"]["MountName"] == world["mount"]
    enis = boto3.client("ec2", region_name="us-east-1").describe_network_interfaces(
        NetworkInterfaceIds=fs["NetworkInterfaceIds"]
    )["NetworkInterfaces"]
    assert [g["GroupId"] for g in enis[0]["Groups"]] == [world["fsx_sg"]]


def test_task_state_machine_and_report(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    fsx = boto3.client("fsx", region_name="us-east-1")
    fsx.create_data_repository_association(
        FileSystemId=world["fs_id"],
        FileSystemPath="/d",
        DataRepositoryPath="s3://data-bucket/datasets/train/",
    )
    fake_fsx.plan_next_task(outcome="FAILED", total=10, failed=2, executing_polls=2)
    task = fsx.create_data_repository_task(
        Type="EXPORT_TO_REPOSITORY",
        FileSystemId=world["fs_id"],
        Paths=["d"],
        Report={
            "Enabled": True,
            "Path": "s3://data-bucket/reports",
            "Scope": "FAILED_FILES_ONLY",
            "Format": "REPORT_CSV_20191124",
        },
    )["DataRepositoryTask"]
    seen = []
    for _ in range(5):
        t = fsx.describe_data_repository_tasks(TaskIds=[task["TaskId"]])["DataRepositoryTasks"][0]
        seen.append(t["Lifecycle"])
    assert seen == ["PENDING", "EXECUTING", "EXECUTING", "FAILED", "FAILED"]
    assert t["Status"]["FailedCount"] == 2 and t["Status"]["SucceededCount"] == 8
    key = f"reports/{task['TaskId']}/failures.csv"
    assert boto3.client("s3", region_name="us-east-1").head_object(Bucket="data-bucket", Key=key)


def test_cancel_goes_through_canceling(world: dict[str, Any]) -> None:
    fsx = boto3.client("fsx", region_name="us-east-1")
    task = fsx.create_data_repository_task(
        Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=world["fs_id"], Report={"Enabled": False}
    )["DataRepositoryTask"]
    assert fsx.cancel_data_repository_task(TaskId=task["TaskId"])["Lifecycle"] == "CANCELING"
    states = [
        fsx.describe_data_repository_tasks(TaskIds=[task["TaskId"]])["DataRepositoryTasks"][0]["Lifecycle"]
        for _ in range(2)
    ]
    assert states == ["CANCELING", "CANCELED"]


def test_fake_rejects_request_shapes_the_service_model_rejects(world: dict[str, Any]) -> None:
    # client-side validation off: the fake's own ParamValidator still refuses the bad shape
    fsx = boto3.client("fsx", region_name="us-east-1", config=Config(parameter_validation=False))
    with pytest.raises(ClientError, match="ValidationException") as err:
        fsx.create_data_repository_task(Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=world["fs_id"])
    assert "Report" in str(err.value)
