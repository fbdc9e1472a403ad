"""A job on the endpoint sees what SageMaker gives it, in the endpoint's region and account.

One two-host managed spot job on an endpoint started with ``--region``/``--account`` (the CLI, as a
user starts it): its script prints its environment; the test greps that environment, the job's
CloudWatch logs and its status messages for anything of this provider or this machine, compares
the job's ``TRAINING_JOB_ARN``/``SAGEMAKER_REGION`` with ``DescribeTrainingJob``, and reads the
billing fields and the listing calls over the finished job.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_dist_training.emulator.pytest_plugin import EmulatorProcess

from .conftest import REPO, log_messages

pytestmark = [pytest.mark.integration]
REGION, ACCOUNT = "eu-west-1", "111122223333"
IMAGE = "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312"
SCRIPT = """\
import json, os, time
print("ENV " + json.dumps(dict(os.environ), sort_keys=True), flush=True)
print("cwd " + os.getcwd(), flush=True)
time.sleep(2)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "done.txt"), "w") as fh:
    fh.write(os.environ["CURRENT_HOST"])
"""


@pytest.fixture(scope="module")
def regional_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    emulator = EmulatorProcess(tmp_path_factory.mktemp("regional-emulator"), region=REGION, account=ACCOUNT)
    try:
        yield emulator
    finally:
        emulator.stop()


def _source_tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = SCRIPT.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _run_job(endpoint: EmulatorProcess) -> dict[str, Any]:
    s3, sm = endpoint.client("s3"), endpoint.client("sagemaker")
    s3.create_bucket(Bucket="job-env", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="job-env", Key="code/sourcedir.tar.gz", Body=_source_tarball())
    s3.put_object(Bucket="job-env", Key="data/a.csv", Body=b"1,2\n")
    sm.create_training_job(
        TrainingJobName="Env-Probe",
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        HyperParameters={
            "sagemaker_program": json.dumps("train.py"),
            "sagemaker_submit_directory": json.dumps("s3://job-env/code/sourcedir.tar.gz"),
        },
        InputDataConfig=[
            {
                "ChannelName": "train",
                "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://job-env/data/"}},
            }
        ],
        OutputDataConfig={"S3OutputPath": "s3://job-env/output"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200},
        EnableManagedSpotTraining=True,
    )
    sm.get_waiter("training_job_completed_or_stopped").wait(
        TrainingJobName="Env-Probe", WaiterConfig={"Delay": 1, "MaxAttempts": 600}
    )
    return dict(sm.describe_training_job(TrainingJobName="Env-Probe"))


def test_a_job_sees_only_what_sagemaker_gives_it(regional_endpoint: EmulatorProcess) -> None:
    endpoint = regional_endpoint
    desc = _run_job(endpoint)
    assert desc["TrainingJobStatus"] == "Completed", desc.get("FailureReason")
    arn = desc["TrainingJobArn"]
    assert arn == f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/env-probe"

    lines = log_messages(endpoint, "/aws/sagemaker/TrainingJobs", "Env-Probe")
    envs = [json.loads(m.removeprefix("ENV ")) for m in lines if m.startswith("ENV ")]
    assert len(envs) == 2  # one per host
    for env in envs:
        assert env["TRAINING_JOB_ARN"] == arn
        assert env["SAGEMAKER_REGION"] == env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == REGION
        assert env["TRAINING_JOB_NAME"] == "Env-Probe"
        assert not [k for k in env if k.startswith("ADT_")], sorted(env)

    # this machine: the endpoint's folder (jobs, hosts' /opt/ml), the repository, the executor's wrapper
    machine = [str(endpoint.root), str(REPO), "host-setup.sh", "/tmp/", "simulated host"]
    statuses = [t.get("StatusMessage", "") for t in desc["SecondaryStatusTransitions"]]
    seen = {
        "environment": [f"{k}={v}" for env in envs for k, v in env.items() if k != "PATH"],
        "logs": [m for m in lines if not m.startswith("ENV ")],
        "status messages": statuses,
    }
    for where, texts in seen.items():
        leaks = [t for t in texts for m in machine if m in t]
        assert not leaks, f"{where} show this machine: {leaks}"
    assert statuses[0] == "Preparing the instances for training"
    assert statuses[-1] == "Training job completed"
    # ... which the endpoint's own log keeps
    endpoint_log = (endpoint.root / "emulator.log").read_text(errors="replace")
    assert (
        f"TrainingJobs Env-Probe: [local] preparing 2 simulated host(s) under {endpoint.root}" in endpoint_log
    )

    # billing: the instances' wall-clock time, less the managed spot saving
    assert desc["TrainingTimeInSeconds"] >= 2
    assert 0 < desc["BillableTimeInSeconds"] < desc["TrainingTimeInSeconds"]

    # the listing calls over the job, and GetCallerIdentity in the same account
    sm = endpoint.client("sagemaker")
    [summary] = sm.list_training_jobs(NameContains="env-PROBE", StatusEquals="Completed")[
        "TrainingJobSummaries"
    ]
    assert summary["TrainingJobArn"] == arn
    found = sm.search(
        Resource="TrainingJob",
        SearchExpression={
            "Filters": [{"Name": "TrainingJobName", "Operator": "Equals", "Value": "Env-Probe"}]
        },
    )["Results"]
    assert [r["TrainingJob"]["TrainingJobArn"] for r in found] == [arn]
    assert found[0]["TrainingJob"]["BillableTimeInSeconds"] == desc["BillableTimeInSeconds"]
    assert endpoint.client("sts").get_caller_identity()["Account"] == ACCOUNT
    model = endpoint.client("s3").get_object(Bucket="job-env", Key="output/Env-Probe/output/model.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(model["Body"].read()), mode="r:gz") as tar:
        assert "done.txt" in tar.getnames()
