"""Fixtures of the emulator tests: demo data and a tiny trained model, made once per session."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.dag_bundles import fast_polling, serve_dags_folder  # noqa: F401  (the emulator tests import them from here)
from tests.datasets import make_dataset
from tests.paths import REPO

BUCKET = "adt-emulator-tests"


def fsx_network(endpoint: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """A VPC with the training subnet and security group, and an FSx for Lustre file system in that
    subnet whose security group allows Lustre (TCP 988, 1018-1023) from the training group.

    Returns ``({"subnet", "training_sg", "fsx_sg"}, the file system as CreateFileSystem answered)``."""
    ec2 = endpoint.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24", AvailabilityZone="us-east-1a")
    training_sg = ec2.create_security_group(GroupName="training", Description="jobs", VpcId=vpc)["GroupId"]
    fsx_sg = ec2.create_security_group(GroupName="fsx", Description="lustre", VpcId=vpc)["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=fsx_sg,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": lo,
                "ToPort": hi,
                "UserIdGroupPairs": [{"GroupId": training_sg}],
            }
            for lo, hi in ((988, 988), (1018, 1023))
        ],
    )
    net = {"subnet": subnet["Subnet"]["SubnetId"], "training_sg": training_sg, "fsx_sg": fsx_sg}
    fs = endpoint.client("fsx").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[net["subnet"]],
        SecurityGroupIds=[fsx_sg],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
    )["FileSystem"]
    return net, fs


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("demo-data"), train=400, test=200)


@pytest.fixture(scope="session")
def model_tarball() -> bytes:
    """A model.tar.gz the demo's evaluate.py can load (untrained weights of the demo MLP)."""
    import torch

    sys.path.insert(0, str(REPO / "examples"))
    from train import build_model

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (
            ("model_config.json", json.dumps({"in_features": 8, "hidden": 16, "classes": 4}).encode()),
            ("model.pt", _state_bytes(torch, build_model(8, 16, 4))),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _state_bytes(torch: Any, model: Any) -> bytes:
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getvalue()


ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


def script_job_spec(tmp_path: Path, name: str, script: str, **over: Any) -> dict[str, Any]:
    """A torchrun-launcher job of ``script`` (its source folder holds only ``train.py``), its model
    under ``s3://<BUCKET>/models``; ``over`` replaces top-level fields."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(script)
    return {
        "name": name,
        "role_arn": ROLE,
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": str(code)},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": {"strategy": "launcher", "launcher": "torchrun", "processes_per_host": 2},
        "output": {"s3_path": f"s3://{BUCKET}/models"},
        "stopping": {"max_runtime_seconds": 300},
        **over,
    }


def log_messages(endpoint: Any, group: str, job: str) -> list[str]:
    """Every CloudWatch message of a job's streams (``<job>/...``) in ``group``."""
    logs = endpoint.client("logs")
    streams = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=f"{job}/")["logStreams"]
    return [
        e["message"]
        for s in streams
        for e in logs.get_log_events(
            logGroupName=group, logStreamName=s["logStreamName"], startFromHead=True
        )["events"]
    ]


def job_interpreters(endpoint: Any) -> dict[str, set[str]]:
    """Which interpreter ran each training and processing job on the endpoint, as the endpoint's log says."""
    sm = endpoint.client("sagemaker")
    found: dict[str, set[str]] = {}
    # a job's interpreter is the executor's line: in the endpoint's log, not the job's
    endpoint_log = (endpoint.root / "emulator.log").read_text(errors="replace").splitlines()
    listed = [
        *(
            ("TrainingJobs", s["TrainingJobName"], "[local] job Python: ")
            for s in sm.list_training_jobs()["TrainingJobSummaries"]
        ),
        *(
            ("ProcessingJobs", s["ProcessingJobName"], "[emulator] python3: ")
            for s in sm.list_processing_jobs()["ProcessingJobSummaries"]
        ),
    ]
    for group, name, said in listed:
        lines = [m for m in endpoint_log if f"{group} {name}: {said}" in m]
        found[name] = {m.split(said, 1)[1].split(" (", 1)[0] for m in lines}
    return found


def assert_jobs_ran_in_the_job_environment(endpoint: Any) -> None:
    from airflow_dist_training.local import job_env

    python = str(job_env.default_env_dir() / "bin" / "python")
    found = job_interpreters(endpoint)
    assert found and all(seen == {python} for seen in found.values()), found


@pytest.fixture
def aws_default_on_endpoint(sagemaker_endpoint: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``aws_default`` points at the endpoint with the connection's ``endpoint_url`` extra."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    conn = {
        "conn_type": "aws",
        "login": "testing",
        "password": "testing",
        "extra": {"endpoint_url": sagemaker_endpoint.endpoint, "region_name": "us-east-1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(conn))
    return sagemaker_endpoint
