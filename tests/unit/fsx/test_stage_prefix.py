"""FSxStagePrefixOperator and friends against moto + the FSx fake: exact requests and error texts."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from conftest import make_world
from fake_fsx import FakeFSx

from airflow_dist_training.compat import TaskDeferred
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.fsx.progress import DataRepositoryTaskFailed
from airflow_dist_training.operators.fsx import (
    FSxDataRepositoryAssociationOperator,
    FSxDataRepositoryTaskOperator,
    FSxPreflightOperator,
    FSxStagePrefixOperator,
)
from airflow_dist_training.spec.training import FSxChannel

CTX: dict[str, Any] = {"run_id": "manual__1"}
CREATES = ("CreateDataRepositoryAssociation", "CreateDataRepositoryTask", "CreateFileSystem")


def stage_op(world: dict[str, Any], **overrides: Any) -> FSxStagePrefixOperator:
    kwargs: dict[str, Any] = dict(
        task_id="stage",
        s3_uri="s3://data-bucket/datasets/train/",
        file_system_id=world["fs_id"],
        file_system_path="/datasets/train",
        subnets=[world["subnet_a"]],
        security_group_ids=[world["train_sg"]],
        aws_conn_id=None,
        region_name="us-east-1",
        poll_interval=0,
        deferrable=False,
    )
    kwargs.update(overrides)
    op = FSxStagePrefixOperator(**kwargs)
    op.hook.sleep = lambda _s: None
    return op


def created(fake: FakeFSx) -> list[str]:
    return [op for op, _ in fake.requests if op in CREATES]


def test_stage_prefix_returns_channel_the_spec_accepts(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    channel = stage_op(world).execute(CTX)
    assert channel == {
        "type": "fsx",
        "file_system_id": world["fs_id"],
        "directory_path": f"/{world['mount']}/datasets/train",
        "access_mode": "ro",
    }
    FSxChannel.model_validate(channel)
    [dra] = fake_fsx.calls("CreateDataRepositoryAssociation")
    assert {k: v for k, v in dra.items() if k != "ClientRequestToken"} == {
        "FileSystemId": world["fs_id"],
        "FileSystemPath": "/datasets/train",
        "DataRepositoryPath": "s3://data-bucket/datasets/train/",
        "BatchImportMetaDataOnCreate": False,
    }
    [task] = fake_fsx.calls("CreateDataRepositoryTask")
    assert {k: v for k, v in task.items() if k != "ClientRequestToken"} == {
        "Type": "IMPORT_METADATA_FROM_REPOSITORY",
        "FileSystemId": world["fs_id"],
        "Paths": ["s3://data-bucket/datasets/train/"],
        "Report": {
            "Enabled": True,
            "Path": "s3://data-bucket/datasets/train",
            "Format": "REPORT_CSV_20191124",
            "Scope": "FAILED_FILES_ONLY",
        },
    }


def test_second_stage_reuses_the_association(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    stage_op(world).execute(CTX)
    stage_op(world).execute({"run_id": "manual__2"})
    assert len(fake_fsx.calls("CreateDataRepositoryAssociation")) == 1
    assert len(fake_fsx.calls("CreateDataRepositoryTask")) == 2


def test_conflicting_association_names_both_prefixes(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    stage_op(world).execute(CTX)
    boto3.client("s3", region_name="us-east-1").put_object(Bucket="data-bucket", Key="other/x", Body=b"1")
    with pytest.raises(SpecValidationError) as err:
        stage_op(world, s3_uri="s3://data-bucket/other/").execute(CTX)
    assoc_id = next(iter(fake_fsx.associations))
    assert str(err.value) == (
        f"file_system_path: /datasets/train on {world['fs_id']} is already associated with "
        f"s3://data-bucket/datasets/train/ (association {assoc_id}), not with the requested "
        "s3://data-bucket/other/. Use another file_system_path, or delete that association first."
    )


def test_unknown_file_system_fails_before_anything_is_created(
    world: dict[str, Any], fake_fsx: FakeFSx
) -> None:
    with pytest.raises(SpecValidationError) as err:
        stage_op(world, file_system_id="fs-0123456789abcdef0").execute(CTX)
    assert str(err.value) == (
        "file_system_id: file system fs-0123456789abcdef0 does not exist "
        "(or is not visible to this connection's account and region)"
    )
    assert created(fake_fsx) == []


def test_wrong_type_and_not_available(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    fake_fsx.set_file_system(world["fs_id"], FileSystemType="OPENZFS", Lifecycle="CREATING")
    with pytest.raises(SpecValidationError) as err:
        stage_op(world).execute(CTX)
    assert str(err.value) == (
        f"file_system_id: file system {world['fs_id']} is OPENZFS, not LUSTRE; FSx channels need FSx for Lustre\n"
        f"file_system_id: file system {world['fs_id']} is CREATING, not AVAILABLE"
    )
    assert created(fake_fsx) == []


def test_mismatched_az_is_an_error(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    with pytest.raises(SpecValidationError) as err:
        stage_op(world, subnets=[world["subnet_b"]]).execute(CTX)
    assert str(err.value) == (
        f"network.subnets: training subnet(s) {world['subnet_b']} (us-east-1b) are not in the Availability "
        f"Zone of file system {world['fs_id']}, us-east-1a (subnet {world['subnet_a']}); use a subnet in "
        "us-east-1a to avoid cross-AZ traffic"
    )
    assert created(fake_fsx) == []


def test_mismatched_az_can_be_a_warning(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    out = FSxPreflightOperator(
        task_id="pf",
        file_system_id=world["fs_id"],
        subnets=[world["subnet_b"]],
        security_group_ids=[world["train_sg"]],
        az_mismatch="warning",
        aws_conn_id=None,
        region_name="us-east-1",
    ).execute(CTX)
    assert len(out["warnings"]) == 1 and "us-east-1b" in out["warnings"][0]
    assert out["mount_name"] == world["mount"]


def test_security_groups_without_lustre_ports(fake_fsx: FakeFSx) -> None:
    world = make_world(fake_fsx, lustre_rules=False)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ec2.authorize_security_group_ingress(  # only 988 opened
        GroupId=world["fsx_sg"],
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 988,
                "ToPort": 988,
                "UserIdGroupPairs": [{"GroupId": world["train_sg"]}],
            }
        ],
    )
    with pytest.raises(SpecValidationError) as err:
        stage_op(world).execute(CTX)
    assert str(err.value) == (
        f"network.security_group_ids: security group(s) {world['fsx_sg']} of file system {world['fs_id']} "
        f"do not allow Lustre traffic on TCP 1018-1023 from the training security group(s) {world['train_sg']}; "
        "add inbound TCP 988 and 1018-1023 rules whose source is a training security group "
        "(or the training subnets' CIDR)"
    )
    assert created(fake_fsx) == []


def test_empty_prefix(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    with pytest.raises(SpecValidationError) as err:
        stage_op(world, s3_uri="s3://data-bucket/nothing-here/").execute(CTX)
    assert str(err.value) == "s3_uri: s3://data-bucket/nothing-here/ is empty (no objects); nothing to stage"
    assert created(fake_fsx) == []


def test_dataset_larger_than_capacity(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    fake_fsx.set_file_system(world["fs_id"], StorageCapacity=0)
    with pytest.raises(SpecValidationError, match=r"holds 3\.9 KiB in 4 objects, more than the 0 GiB"):
        stage_op(world).execute(CTX)
    assert created(fake_fsx) == []


def test_task_failed_part_way_points_to_report(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    fake_fsx.plan_next_task(outcome="FAILED", failed=1, failure_message="1 file failed to import")
    with pytest.raises(DataRepositoryTaskFailed) as err:
        stage_op(world).execute(CTX)
    task_id = next(iter(fake_fsx.tasks))
    assert str(err.value) == (
        f"FSx data repository task {task_id} ended FAILED: 1 file failed to import (3/4 succeeded, 1 failed). "
        f"Completion report (failed files): s3://data-bucket/datasets/train/{task_id}/"
    )


def test_path_outside_the_association(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    stage_op(world).execute(CTX)
    fake_fsx.requests.clear()
    op = FSxDataRepositoryTaskOperator(
        task_id="export",
        file_system_id=world["fs_id"],
        fsx_task_type="export",
        paths=["/checkpoints"],
        aws_conn_id=None,
        region_name="us-east-1",
        deferrable=False,
    )
    with pytest.raises(SpecValidationError) as err:
        op.execute(CTX)
    assert str(err.value) == (
        "paths[0]: /checkpoints is outside every data repository association; its associations are: "
        "/datasets/train -> s3://data-bucket/datasets/train/"
    )
    assert created(fake_fsx) == []


def test_export_task_sends_relative_paths_and_defers(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    FSxDataRepositoryAssociationOperator(
        task_id="dra",
        file_system_id=world["fs_id"],
        file_system_path="/datasets/train",
        s3_uri="s3://data-bucket/datasets/train",
        auto_export_events=["NEW", "CHANGED"],
        aws_conn_id=None,
        region_name="us-east-1",
    ).execute(CTX)
    assert fake_fsx.calls("CreateDataRepositoryAssociation")[0]["S3"] == {
        "AutoExportPolicy": {"Events": ["NEW", "CHANGED"]}
    }
    op = FSxDataRepositoryTaskOperator(
        task_id="export",
        file_system_id=world["fs_id"],
        fsx_task_type="export",
        paths=["/datasets/train/ckpt"],
        aws_conn_id=None,
        region_name="us-east-1",
        deferrable=True,
        poll_interval=5,
    )
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(CTX)
    req = fake_fsx.calls("CreateDataRepositoryTask")[0]
    assert req["Type"] == "EXPORT_TO_REPOSITORY" and req["Paths"] == ["datasets/train/ckpt"]
    trigger = deferred.value.trigger
    assert trigger.serialize()[1]["fsx_task_id"] == next(iter(fake_fsx.tasks))
    assert deferred.value.method_name == "execute_complete"


def test_release_task_logs_released_capacity(world: dict[str, Any], fake_fsx: FakeFSx, caplog: Any) -> None:
    stage_op(world).execute(CTX)
    fake_fsx.plan_next_task(released_bytes=5 * 1024**3)
    op = FSxDataRepositoryTaskOperator(
        task_id="release",
        file_system_id=world["fs_id"],
        fsx_task_type="release",
        paths=["/datasets/train"],
        release_after_days=1,
        aws_conn_id=None,
        region_name="us-east-1",
        deferrable=False,
        poll_interval=0,
    )
    op.hook.sleep = lambda _s: None
    result = op.execute(CTX)
    assert result["lifecycle"] == "SUCCEEDED" and result["released_bytes"] == 5 * 1024**3
    req = fake_fsx.calls("CreateDataRepositoryTask")[-1]
    assert req["ReleaseConfiguration"] == {"DurationSinceLastAccess": {"Unit": "DAYS", "Value": 1}}
