"""FSx fixtures: moto (mock_aws) + the FSx fake, a VPC with training/FSx security groups, a dataset."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).parent))

from fake_fsx import FakeFSx

REGION = "us-east-1"


def make_world(fake: FakeFSx, *, lustre_rules: bool = True) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION)
    subnets = ec2.describe_subnets()["Subnets"]
    by_az = {s["AvailabilityZone"]: s for s in subnets}
    vpc_id = by_az["us-east-1a"]["VpcId"]
    train_sg = ec2.create_security_group(GroupName="train", Description="training", VpcId=vpc_id)["GroupId"]
    fsx_sg = ec2.create_security_group(GroupName="fsx", Description="fsx", VpcId=vpc_id)["GroupId"]
    if lustre_rules:
        ec2.authorize_security_group_ingress(
            GroupId=fsx_sg,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": lo,
                    "ToPort": hi,
                    "UserIdGroupPairs": [{"GroupId": train_sg}],
                }
                for lo, hi in ((988, 988), (1018, 1023))
            ],
        )
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="data-bucket")
    for i in range(4):
        s3.put_object(Bucket="data-bucket", Key=f"datasets/train/part-{i}.bin", Body=b"x" * 1000)
    fsx = boto3.client("fsx", region_name=REGION)
    fs = fsx.create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[by_az["us-east-1a"]["SubnetId"]],
        SecurityGroupIds=[fsx_sg],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
    )["FileSystem"]
    fake.requests.clear()
    return {
        "fs_id": fs["FileSystemId"],
        "mount": fs["LustreConfiguration"]["MountName"],
        "subnet_a": by_az["us-east-1a"]["SubnetId"],
        "subnet_b": by_az["us-east-1b"]["SubnetId"],
        "train_sg": train_sg,
        "fsx_sg": fsx_sg,
        "vpc_id": vpc_id,
    }


@pytest.fixture
def fake_fsx(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFSx]:
    with mock_aws():
        yield FakeFSx().install(monkeypatch)


@pytest.fixture
def world(fake_fsx: FakeFSx) -> dict[str, Any]:
    return make_world(fake_fsx)


@pytest.fixture
def hook(fake_fsx: FakeFSx) -> Any:
    from airflow_dist_training.hooks.fsx import FSxHook

    h = FSxHook(aws_conn_id=None, region_name=REGION)
    h.sleep = lambda _s: None
    return h
