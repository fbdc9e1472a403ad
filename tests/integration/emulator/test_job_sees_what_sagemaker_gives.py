"""A job on the endpoint sees what SageMaker gives it, in the endpoint's region and account.

One two-host managed spot job on an endpoint started with ``--region``/``--account`` (the CLI, as a
user starts it): its script prints its environment and saves it (with ``sys.path``,
``sys.executable``, ``sys.prefix``) with its model; the test greps that environment (as the process
had it), the job's CloudWatch logs and its status messages for anything of this provider or this
machine (the job environment is the image's ``/opt/conda``), and so for a processing job; compares the job's ``TRAINING_JOB_ARN``/``SAGEMAKER_REGION`` with
``DescribeTrainingJob``, checks that answer member by member against botocore's service model, and
reads the billing fields and the listing calls over the finished job.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.emulator.pytest_plugin import EmulatorProcess
from airflow_dist_training.local import job_env

from .aws_shapes import raw_answer, shape_problems
from .conftest import REPO, log_messages

pytestmark = [pytest.mark.integration]
REGION, ACCOUNT = "eu-west-1", "111122223333"
# where a path in a job's environment may point: the image's folders (HOME is /root in the images)
IMAGE_PATHS = ("/opt/ml", "/opt/conda", "/usr/", "/bin", "/sbin")
_ABSOLUTE = re.compile(r'(?:^|(?<=[:"\s=,\[]))(/(?!/)[^\s:",\]}]*)')
IMAGE = "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312"
SCRIPT = """\
import json, os, sys, time
print("ENV " + json.dumps(dict(os.environ), sort_keys=True), flush=True)
print("SYS " + json.dumps([sys.executable, sys.prefix, sys.base_prefix, *sys.path]), flush=True)
print("cwd " + os.getcwd(), flush=True)
time.sleep(2)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "done.txt"), "w") as fh:
    fh.write(os.environ["CURRENT_HOST"])
# the environment as the process has it (the log is what CloudWatch shows, after the endpoint's rewriting)
with open(os.path.join(os.environ["SM_MODEL_DIR"], os.environ["CURRENT_HOST"] + "-env.json"), "w") as fh:
    json.dump(dict(os.environ), fh)
"""
# a processing job's script: what it sees, printed and saved to its output (a fixed /opt/ml path)
PROCESSING_SCRIPT = """\
import json, os, sys
seen = {"environ": dict(os.environ), "sys": [sys.executable, sys.prefix, sys.base_prefix, *sys.path]}
print("SEEN " + json.dumps(seen), flush=True)
with open("/opt/ml/processing/output/seen.json", "w") as fh:
    json.dump(seen, fh)
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


@pytest.fixture(scope="module")
def finished_job(regional_endpoint: EmulatorProcess) -> dict[str, Any]:
    """The job, run to its end once: its DescribeTrainingJob."""
    endpoint = regional_endpoint
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


def test_a_job_sees_only_what_sagemaker_gives_it(
    regional_endpoint: EmulatorProcess, finished_job: dict[str, Any]
) -> None:
    endpoint, desc = regional_endpoint, finished_job
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

    # the job environment is the image's /opt/conda: its interpreter, its prefix, its sys.path
    [sys_seen, _] = [json.loads(m.removeprefix("SYS ")) for m in lines if m.startswith("SYS ")]
    assert sys_seen[:2] == ["/opt/conda/bin/python", "/opt/conda"], sys_seen
    assert "/opt/conda/lib/python3.11/site-packages" in sys_seen or any(
        p.startswith("/opt/conda/lib/") and p.endswith("site-packages") for p in sys_seen
    ), sys_seen

    machine = _machine(endpoint)
    statuses = [t.get("StatusMessage", "") for t in desc["SecondaryStatusTransitions"]]
    seen = {
        "environment": [f"{k}={v}" for env in envs for k, v in env.items()],
        "sys": sys_seen,
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
        saved = [json.load(tar.extractfile(f"algo-{n}-env.json")) for n in (1, 2)]  # type: ignore[arg-type]

    # the environment as the processes had it: its paths are the image's only
    for env in saved:
        assert env["PATH"] == "/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        assert not [k for k in env if k.startswith(("ADT_", "AIRFLOW"))], sorted(env)
        paths = {p for v in env.values() for p in _ABSOLUTE.findall(v)}
        assert {"/opt/ml/model", "/opt/ml/input/data/train"} <= paths  # the variables' paths are read
        foreign = sorted(p for p in paths if p not in ("/", "/root") and not p.startswith(IMAGE_PATHS))
        assert not foreign, f"the job's environment shows this machine: {foreign}"


def test_a_processing_job_sees_only_what_sagemaker_gives_it(regional_endpoint: EmulatorProcess) -> None:
    """Its own /opt/ml (a script may hard-code its paths), the job environment as /opt/conda, and
    no path of this machine in what it sees, its CloudWatch log or its description."""
    endpoint = regional_endpoint
    s3, sm = endpoint.client("s3"), endpoint.client("sagemaker")
    s3.create_bucket(Bucket="job-env-processing", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="job-env-processing", Key="code/probe.py", Body=PROCESSING_SCRIPT.encode())
    sm.create_processing_job(
        ProcessingJobName="Env-Probe-Processing",
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
        AppSpecification={
            "ImageUri": IMAGE,
            "ContainerEntrypoint": ["python3", "/opt/ml/processing/input/code/probe.py"],
        },
        ProcessingInputs=[
            {
                "InputName": "code",
                "S3Input": {
                    "S3Uri": "s3://job-env-processing/code/",
                    "LocalPath": "/opt/ml/processing/input/code",
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                },
            }
        ],
        ProcessingOutputConfig={
            "Outputs": [
                {
                    "OutputName": "seen",
                    "S3Output": {
                        "S3Uri": "s3://job-env-processing/out/",
                        "LocalPath": "/opt/ml/processing/output",
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        ProcessingResources={
            "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 10}
        },
        StoppingCondition={"MaxRuntimeInSeconds": 300},
    )
    sm.get_waiter("processing_job_completed_or_stopped").wait(
        ProcessingJobName="Env-Probe-Processing", WaiterConfig={"Delay": 1, "MaxAttempts": 300}
    )
    desc = sm.describe_processing_job(ProcessingJobName="Env-Probe-Processing")
    assert desc["ProcessingJobStatus"] == "Completed", desc.get("FailureReason")
    seen = json.loads(s3.get_object(Bucket="job-env-processing", Key="out/seen.json")["Body"].read())
    env = seen["environ"]
    assert seen["sys"][:2] == ["/opt/conda/bin/python3", "/opt/conda"], seen["sys"]
    assert env["PATH"] == "/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert env["PROCESSING_JOB_NAME"] == "Env-Probe-Processing" and env["AWS_REGION"] == REGION
    assert not [k for k in env if k.startswith(("ADT_", "AIRFLOW"))], sorted(env)
    lines = log_messages(endpoint, "/aws/sagemaker/ProcessingJobs", "Env-Probe-Processing")
    assert any(m.startswith("SEEN ") for m in lines), lines
    texts = {
        "environment": [f"{k}={v}" for k, v in env.items()],
        "sys": seen["sys"],
        "logs": lines,
        "description": [json.dumps(desc, default=str)],
    }
    machine = _machine(endpoint)
    for where, found in texts.items():
        leaks = [t for t in found for m in machine if m in t]
        assert not leaks, f"the processing job's {where} show this machine: {leaks}"


def test_describe_training_job_answers_every_member_as_the_service_model_says(
    regional_endpoint: EmulatorProcess, finished_job: dict[str, Any]
) -> None:
    """The raw DescribeTrainingJob of the finished job, member by member
    against botocore's model: what SDK v3's ``TrainingJob`` resource (sagemaker-core, generated from
    that model) and the Amazon provider's waiters and ``describe_training_job_with_log`` read."""
    answer, shape = raw_answer(
        regional_endpoint.client("sagemaker"), "DescribeTrainingJob", TrainingJobName="Env-Probe"
    )
    assert shape_problems(answer, shape) == []
    # the members those clients read, there with values (not only allowed by the model)
    assert answer["TrainingJobStatus"] == "Completed" and answer["SecondaryStatus"] == "Completed"
    assert answer["ResourceConfig"]["InstanceCount"] == 2
    assert answer["TrainingStartTime"] <= answer["TrainingEndTime"] <= answer["LastModifiedTime"]
    assert answer["ModelArtifacts"]["S3ModelArtifacts"] == "s3://job-env/output/Env-Probe/output/model.tar.gz"
    assert answer["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://job-env/data/"
    assert all(t["StatusMessage"] and t["StartTime"] for t in answer["SecondaryStatusTransitions"])
    assert answer["EnableManagedSpotTraining"] is True
    # ... and the check can fail: a misspelled member, a status AWS does not have, a missing member
    bad = {**answer, "TrainingJobStatus": "Done", "TrainingTimeInSecond": 3}
    del bad["CreationTime"]
    assert sorted(shape_problems(bad, shape)) == [
        "DescribeTrainingJobResponse.CreationTime: required, missing",
        "DescribeTrainingJobResponse.TrainingJobStatus: 'Done' is not one of TrainingJobStatus's values",
        "DescribeTrainingJobResponse.TrainingTimeInSecond: not a member of DescribeTrainingJobResponse",
    ]


def _machine(endpoint: EmulatorProcess) -> list[str]:
    """What of this machine a job must not see: the endpoint's folder (jobs, hosts' /opt/ml), the
    repository, the job environment's folder, the home folder's cache, the job interpreter's base
    installation (a venv's ``home``), the executor's wrapper and its words."""
    env_dir = job_env.default_env_dir()
    cfg = dict(
        line.split(" = ", 1) for line in (env_dir / "pyvenv.cfg").read_text().splitlines() if " = " in line
    )
    folders = [endpoint.root, REPO, env_dir, Path.home() / ".cache", Path(cfg["home"]).parent]
    return [*map(str, folders), "host-setup.sh", "/tmp/", "simulated host"]
