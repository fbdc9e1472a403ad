"""Your own container's entry point (``image.container_entry_point`` / ``container_arguments``) really runs.

The same spec runs on the local backend and on the SageMaker test endpoint: each runs the request's
``ContainerEntrypoint`` + ``ContainerArguments`` as the container would (``python3`` is the job's
interpreter), with the ``scripts`` channel where SageMaker downloads it, and packs ``/opt/ml/model``
as ``model.tar.gz``. The command is examples/specs/scripts/train.py (stdlib only, so both tests take a
few seconds); ``python3`` is still the job environment's interpreter, as in the image, so that
environment must be built (``airflow-dist-training job-env``; scripts/setup.sh does it).
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_dist_training.hooks.local_training import LocalTrainingHook
from airflow_dist_training.operators.training import DistributedTrainingOperator

from .conftest import BUCKET, REPO

sys.path.insert(0, str(REPO / "tests" / "integration" / "training"))
from fake_sagemaker_training import make_context

pytestmark = [pytest.mark.integration]
EXAMPLE = REPO / "examples" / "specs" / "own_entry_point.yaml"
SCRIPTS = EXAMPLE.parent / "scripts"


def example(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["source"] = {"entry_point": "train.py", "source_dir": str(SCRIPTS)}
    data["channels"]["scripts"]["local_source"] = str(SCRIPTS)
    data.update(overrides)
    return data


def summary_of(tarball: bytes) -> dict[str, Any]:
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        member = tar.extractfile("summary.json")
        assert member is not None
        return dict(json.loads(member.read()))


def test_own_entry_point_runs_on_the_local_backend(tmp_path: Path) -> None:
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=False)
    lines: list[str] = []
    result = hook.run_job(
        example(output={"s3_path": "s3://my-ml-bucket/output"}), "own-entry", log=lines.append
    )
    assert result["status"] == "Completed"
    assert any("[algo-1] epoch=2 loss=0.5000" in line for line in lines)
    job = tmp_path / "root" / "own-entry"
    summary = json.loads((job / "model" / "summary.json").read_text())
    # ContainerArguments as sent; /opt/ml/model is relocated when this machine has no namespaces
    assert summary["argv"] in (
        ["--epochs", "2", "--model-dir", "/opt/ml/model"],
        ["--epochs", "2", "--model-dir", str(job / "model")],
    )
    assert (summary["epochs"], summary["host"]) == (2, "algo-1")


def test_own_entry_point_runs_on_the_test_endpoint(sagemaker_endpoint: Any) -> None:
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(SCRIPTS / "train.py"), BUCKET, "scripts/train.py")
    spec = example(
        channels={"scripts": {"type": "s3", "uri": f"s3://{BUCKET}/scripts"}},
        output={"s3_path": f"s3://{BUCKET}/models"},
    )
    op = DistributedTrainingOperator(
        task_id="train", spec=spec, backend="sagemaker", aws_conn_id=None, region_name="us-east-1",
        poll_interval=0.5, deferrable=False,
    )  # fmt: skip
    result = op.execute(make_context("run-own-entry"))
    desc = sagemaker_endpoint.client("sagemaker").describe_training_job(TrainingJobName=result["job_name"])
    assert desc["TrainingJobStatus"] == "Completed"
    assert desc["AlgorithmSpecification"]["ContainerEntrypoint"] == [
        "python3",
        "/opt/ml/input/data/scripts/train.py",
    ]
    assert desc["AlgorithmSpecification"]["ContainerArguments"] == [
        "--epochs",
        "2",
        "--model-dir",
        "/opt/ml/model",
    ]
    key = desc["ModelArtifacts"]["S3ModelArtifacts"].split(f"s3://{BUCKET}/", 1)[1]
    summary = summary_of(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert summary["epochs"] == 2 and summary["host"] == "algo-1"
