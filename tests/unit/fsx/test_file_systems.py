"""Create/delete file systems (XCom, teardown), pre-flight of a training spec, pure request rules."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import DAG
from fake_fsx import FakeFSx

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.fsx import requests as req
from airflow_dist_training.fsx.preflight import missing_lustre_ports, preflight_training_spec
from airflow_dist_training.operators.fsx import FSxCreateFileSystemOperator, FSxDeleteFileSystemOperator
from airflow_dist_training.spec.training import TrainingJobSpec


class _TI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}
        self.dag_id, self.task_id, self.map_index = "d", "create", -1

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_create_scratch_pushes_mount_and_dns_then_delete(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    ti = _TI()
    out = FSxCreateFileSystemOperator(
        task_id="create",
        subnet_id=world["subnet_a"],
        security_group_ids=[world["fsx_sg"]],
        storage_capacity_gib=2400,
        aws_conn_id=None,
        region_name="us-east-1",
        poll_interval=0,
    ).execute({"ti": ti, "run_id": "r1"})
    [request] = fake_fsx.calls("CreateFileSystem")
    assert request["LustreConfiguration"] == {"DeploymentType": "SCRATCH_2", "DataCompressionType": "LZ4"}
    assert request["StorageCapacity"] == 2400 and request["ClientRequestToken"].startswith("adt-")
    assert ti.pushed == {
        "file_system_id": out["file_system_id"],
        "mount_name": out["mount_name"],
        "dns_name": out["dns_name"],
    }
    assert out["dns_name"] == f"{out['file_system_id']}.fsx.us-east-1.amazonaws.com" and out["mount_name"]
    delete = FSxDeleteFileSystemOperator(
        task_id="delete", file_system_id=out["file_system_id"], aws_conn_id=None, region_name="us-east-1"
    )
    assert delete.execute({})["lifecycle"] == "DELETING"
    assert delete.execute({}) == {
        "file_system_id": out["file_system_id"],
        "lifecycle": "DELETED",
    }  # idempotent


def test_delete_without_id_is_a_noop() -> None:
    op = FSxDeleteFileSystemOperator(task_id="delete", file_system_id="None")
    assert op.execute({}) == {"file_system_id": None, "lifecycle": None}


def test_delete_runs_as_teardown_even_if_training_fails() -> None:
    from airflow.providers.standard.operators.empty import EmptyOperator

    with DAG("t", schedule=None):
        create = FSxCreateFileSystemOperator(
            task_id="create", subnet_id="subnet-1", security_group_ids=["sg-1"]
        )
        train = EmptyOperator(task_id="train")
        delete = FSxDeleteFileSystemOperator(
            task_id="delete", file_system_id="{{ ti.xcom_pull('create')['file_system_id'] }}"
        )
        create >> train >> delete.as_teardown(setups=create)
    assert delete.is_teardown and delete.trigger_rule == "all_done_setup_success"
    assert FSxDeleteFileSystemOperator(task_id="x", file_system_id="fs-1").trigger_rule == "all_done"


def test_bad_file_system_settings() -> None:
    with pytest.raises(SpecValidationError) as err:
        req.build_lustre_file_system_request(
            subnet_id="s", security_group_ids=[], storage_capacity_gib=1000, deployment_type="PERSISTENT_2"
        )
    assert str(err.value).splitlines() == [
        "storage_capacity_gib: 1000 GiB: SSD Lustre takes 1200, 2400 or a multiple of 2400",
        "per_unit_storage_throughput: PERSISTENT_2 needs one of [125, 250, 500, 1000] MB/s/TiB",
        "security_group_ids: give at least one security group allowing Lustre traffic",
    ]


def test_preflight_training_spec_checks_mount_name(world: dict[str, Any], hook: Any) -> None:
    spec = TrainingJobSpec.model_validate(
        {
            "name": "j",
            "image": {"uri": "img"},
            "source": {"entry_point": "train.py"},
            "compute": {"instance_type": "ml.p4d.24xlarge"},
            "network": {"subnets": [world["subnet_a"]], "security_group_ids": [world["train_sg"]]},
            "channels": {
                "train": {"type": "fsx", "file_system_id": world["fs_id"], "directory_path": "/wrong/train"}
            },
        }
    )
    with pytest.raises(SpecValidationError) as err:
        preflight_training_spec(hook, spec)
    assert str(err.value) == (
        f"channels.train.directory_path: /wrong/train must start with /{world['mount']}, "
        f"the mount name of {world['fs_id']}"
    )


def test_lustre_ports_by_cidr_and_self_reference() -> None:
    cidr_rule = {
        "GroupId": "sg-f",
        "IpPermissions": [
            {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 1023, "IpRanges": [{"CidrIp": "10.0.0.0/16"}]}
        ],
    }
    assert missing_lustre_ports([cidr_rule], ["sg-t"], ["10.0.1.0/24"]) == []
    assert missing_lustre_ports([cidr_rule], ["sg-t"], ["172.16.0.0/24"]) == [(988, 988), (1018, 1023)]
    self_ref = {
        "GroupId": "sg-s",
        "IpPermissions": [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": "sg-s"}]}],
    }
    assert missing_lustre_ports([self_ref], ["sg-s"], []) == []
    assert missing_lustre_ports([self_ref], ["sg-other"], []) == [(988, 988), (1018, 1023)]


def test_association_overlap_rules() -> None:
    existing = [
        {
            "AssociationId": "dra-1",
            "FileSystemId": "fs-1",
            "FileSystemPath": "/data",
            "DataRepositoryPath": "s3://bkt/data/",
            "Lifecycle": "AVAILABLE",
        }
    ]
    assert req.match_association(existing, "fs-1", "/data/", "s3://bkt/data").action == "reuse"
    assert req.match_association(existing, "fs-1", "/data/train", "s3://bkt/data/train/").action == "reuse"
    assert req.match_association(existing, "fs-1", "/other", "s3://bkt/other/").action == "create"
    with pytest.raises(
        SpecValidationError, match=r"lies inside association dra-1 \(/data -> s3://bkt/data/\)"
    ):
        req.match_association(existing, "fs-1", "/data/train", "s3://bkt/elsewhere/")
    with pytest.raises(SpecValidationError, match="s3_uri: s3://bkt/data/x/ overlaps s3://bkt/data/"):
        req.match_association(existing, "fs-1", "/x", "s3://bkt/data/x/")


def test_sensor_pokes_until_succeeded_and_fails_with_report(world: dict[str, Any], fake_fsx: FakeFSx) -> None:
    import boto3

    from airflow_dist_training.fsx.progress import DataRepositoryTaskFailed
    from airflow_dist_training.sensors.fsx import FSxDataRepositoryTaskSensor

    fsx = boto3.client("fsx", region_name="us-east-1")
    report = {
        "Enabled": True,
        "Path": "s3://data-bucket/r",
        "Format": "REPORT_CSV_20191124",
        "Scope": "FAILED_FILES_ONLY",
    }
    ok = fsx.create_data_repository_task(
        Type="EXPORT_TO_REPOSITORY", FileSystemId=world["fs_id"], Report=report
    )
    sensor = FSxDataRepositoryTaskSensor(
        task_id="s",
        fsx_task_id=ok["DataRepositoryTask"]["TaskId"],
        aws_conn_id=None,
        region_name="us-east-1",
        deferrable=False,
    )
    assert [sensor.poke({}) for _ in range(3)] == [False, False, True]
    fake_fsx.plan_next_task(outcome="FAILED", failed=1)
    bad = fsx.create_data_repository_task(
        Type="EXPORT_TO_REPOSITORY", FileSystemId=world["fs_id"], Report=report
    )
    bad_id = bad["DataRepositoryTask"]["TaskId"]
    sensor = FSxDataRepositoryTaskSensor(
        task_id="s2", fsx_task_id=bad_id, aws_conn_id=None, region_name="us-east-1"
    )
    sensor.poke({}), sensor.poke({})
    with pytest.raises(
        DataRepositoryTaskFailed, match=f"Completion report \\(failed files\\): s3://data-bucket/r/{bad_id}/"
    ):
        sensor.poke({})
