"""The Amazon provider's own SageMaker operators, unchanged, in a DAG run by ``dag.test()``.

``SageMakerTrainingOperator`` (synchronous, streaming the job's log, and deferrable) and
``SageMakerProcessingOperator`` send their requests to the endpoint through the ``aws_default``
connection's ``endpoint_url``; the role is a name, which the training operator expands with IAM
``GetRole``. Asserted: what the operators report (task states, the XCom'd job description, the log
lines they print), the model the jobs wrote, the deferred job's whole log as the provider's own log
reader streams it, and what the processing container saw (its environment and log).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.local import job_env

from .conftest import log_messages, serve_dags_folder

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("sagemaker-emulator")]
BUCKET = "provider-ops"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312"
TRAIN = """\
import os
rows = open(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "a.csv")).read().split()
print(f"provider-ops: {os.environ['TRAINING_JOB_NAME']} read {len(rows)} rows", flush=True)
print("loss=0.25", flush=True)
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("weights")
"""
PROCESS = """\
import json, os, sys
data, output = sys.argv[1:3]
rows = open(os.path.join(data, "a.csv")).read().split()
open(os.path.join(output, "count.txt"), "w").write(str(len(rows)))
json.dump(dict(os.environ), open(os.path.join(output, "env.json"), "w"))
print("provider-ops: processed", len(rows), flush=True)
"""
DAG = """\
import json, pendulum
from airflow.sdk import DAG
from airflow.providers.amazon.aws.operators.sagemaker import (
    SageMakerProcessingOperator, SageMakerTrainingOperator)

TRAINING = json.loads({training!r})
PROCESSING = json.loads({processing!r})
with DAG("amazon_provider_on_emulator", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
    sync = SageMakerTrainingOperator(
        task_id="train_sync", config={{**TRAINING, "TrainingJobName": "provider-sync"}},
        print_log=True, check_interval=1, action_if_job_exists="fail")
    deferred = SageMakerTrainingOperator(
        task_id="train_deferrable", config={{**TRAINING, "TrainingJobName": "provider-deferred"}},
        print_log=True, check_interval=1, action_if_job_exists="fail", deferrable=True)
    process = SageMakerProcessingOperator(
        task_id="process", config=PROCESSING, check_interval=1, action_if_job_exists="fail")
    sync >> deferred >> process
"""


def _tarball(name: str, text: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(text.encode())
        tar.addfile(info, io.BytesIO(text.encode()))
    return buf.getvalue()


def _requests() -> tuple[dict[str, Any], dict[str, Any]]:
    training = {
        "RoleArn": "SageMakerRole",  # a name: the operator expands it with IAM GetRole
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "HyperParameters": {
            "sagemaker_program": json.dumps("train.py"),
            "sagemaker_submit_directory": json.dumps(f"s3://{BUCKET}/code/sourcedir.tar.gz"),
        },
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/data/"}},
            }
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }
    processing = {
        "ProcessingJobName": "provider-process",
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "AppSpecification": {
            "ImageUri": IMAGE,
            "ContainerEntrypoint": ["python3", "/opt/ml/processing/input/code/process.py"],
            # the paths as arguments: the endpoint runs processing jobs without their own /opt/ml
            "ContainerArguments": ["/opt/ml/processing/input/data", "/opt/ml/processing/output"],
        },
        "ProcessingInputs": [
            {
                "InputName": name,
                "S3Input": {
                    "S3Uri": f"s3://{BUCKET}/{prefix}",
                    "LocalPath": f"/opt/ml/processing/input/{name}",
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                },
            }
            for name, prefix in (("code", "process/"), ("data", "data/"))
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "count",
                    "S3Output": {
                        "S3Uri": f"s3://{BUCKET}/processed",
                        "LocalPath": "/opt/ml/processing/output",
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        "ProcessingResources": {
            "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 10}
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
    }
    return training, processing


def test_the_amazon_providers_operators_run_unchanged(
    aws_default_on_endpoint: Any,
    airflow_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from airflow_dist_training.compat import DagBag

    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz", Body=_tarball("train.py", TRAIN))
    s3.put_object(Bucket=BUCKET, Key="process/process.py", Body=PROCESS.encode())
    s3.put_object(Bucket=BUCKET, Key="data/a.csv", Body=b"1\n2\n3\n")
    training, processing = _requests()
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "provider_dag.py").write_text(
        DAG.format(training=json.dumps(training), processing=json.dumps(processing))
    )
    serve_dags_folder(dags, monkeypatch)
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}

    run = bag.dags["amazon_provider_on_emulator"].test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    out = capfd.readouterr().out
    sm = endpoint.client("sagemaker")
    for name in ("provider-sync", "provider-deferred"):
        desc = sm.describe_training_job(TrainingJobName=name)
        assert desc["TrainingJobStatus"] == "Completed"
        assert desc["RoleArn"] == "arn:aws:iam::123456789012:role/service-role/SageMakerRole"
        assert desc["BillableTimeInSeconds"] == desc["TrainingTimeInSeconds"] > 0
        model = s3.get_object(Bucket=BUCKET, Key=f"output/{name}/output/model.tar.gz")["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(model), mode="r:gz") as tar:
            assert "model.txt" in tar.getnames()
    # the synchronous operator streamed the job's log to its end, each line once (its reads resume
    # from startTime and a skip count: CloudWatch's order and tokens); the deferrable one (provider
    # 9.39) prints the log only up to its deferral: its SageMakerTrigger only waits (no provider since
    # 9.0 streams a log while deferred), and the task ends with the job's final status
    assert out.count("provider-ops: provider-sync read 3 rows") == 1
    assert out.index("provider-ops: provider-sync read 3 rows") < out.index("loss=0.25")
    assert "SageMaker job provider-deferred completed." in out
    # the deferred job's log, read to its end by the provider's own reader (DescribeLogStreams by
    # prefix, GetLogEvents from the head until nextForwardToken repeats), is the whole stream
    streamed = _provider_log_reader_lines("provider-deferred")
    assert streamed == log_messages(endpoint, "/aws/sagemaker/TrainingJobs", "provider-deferred")
    assert streamed.index("provider-ops: provider-deferred read 3 rows") < streamed.index("loss=0.25")
    assert (
        sm.describe_processing_job(ProcessingJobName="provider-process")["ProcessingJobStatus"] == "Completed"
    )
    assert s3.get_object(Bucket=BUCKET, Key="processed/count.txt")["Body"].read() == b"3"
    # the processing container's environment: the image's and SageMaker's, none of the endpoint's
    env = json.loads(s3.get_object(Bucket=BUCKET, Key="processed/env.json")["Body"].read())
    image = {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}
    given = {"PROCESSING_JOB_NAME", "AWS_REGION", "AWS_DEFAULT_REGION", "PYTHONUNBUFFERED"}
    shell = {"PWD", "OLDPWD", "SHLVL", "_"}  # what the python3 shim's /bin/sh exports
    assert set(env) - image - given - shell == set(), sorted(env)
    assert env["PATH"].endswith(":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    assert env["AWS_REGION"] == "us-east-1" and env["PROCESSING_JOB_NAME"] == "provider-process"
    # its log: what the script printed, no folder of this machine (the interpreter line is the endpoint's)
    printed = log_messages(endpoint, "/aws/sagemaker/ProcessingJobs", "provider-process")
    assert "provider-ops: processed 3" in printed
    machine = (str(endpoint.root), str(job_env.default_env_dir()))
    assert not [m for m in printed if any(path in m for path in machine)], printed


def _provider_log_reader_lines(job: str) -> list[str]:
    """The lines ``SageMakerHook.describe_training_job_with_log`` prints for a finished job."""
    from airflow.providers.amazon.aws.hooks.sagemaker import LogState, SageMakerHook

    hook = SageMakerHook(aws_conn_id="aws_default")
    printed: list[str] = []
    hook.log.info = lambda message, *args: printed.append(message % args if args else message)  # type: ignore[method-assign]
    desc = hook.describe_training_job(job)
    hook.describe_training_job_with_log(job, {}, [], 1, LogState.COMPLETE, desc, 0.0)
    return printed
