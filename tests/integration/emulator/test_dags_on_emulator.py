"""The shipped retraining DAG with ``backend=sagemaker``, end to end on the SageMaker test endpoint.

The Airflow AWS connection points at the endpoint through its ``endpoint_url`` extra (as a user
would configure it). The run trains for real, uploads the model, runs the evaluation processing
job (the local evaluation script and data are uploaded to the run's S3 prefix), gates, and
registers a model package whose metrics point at the evaluation file; all asserted from the
endpoint's state.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]
DAG_FILE = REPO / "dags" / "distributed_retraining.py"
DEMO_BUCKET = "adt-demo-bucket"
SERVING_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/adt-serve:1"


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


@pytest.fixture
def retraining_dag(demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow_dist_training.compat import DagBag

    (tmp_path / "source").symlink_to(demo_data)
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def test_retraining_dag_on_sagemaker_trains_evaluates_gates_and_registers(
    aws_default_on_endpoint: Any, retraining_dag: Any, demo_data: Path
) -> None:
    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=DEMO_BUCKET)  # the demo's bucket, seeded with its training data
    s3.upload_file(str(demo_data / "train" / "data.csv"), DEMO_BUCKET, "data/train/data.csv")

    run = retraining_dag.test(
        run_conf={"backend": "sagemaker", "epochs": 4, "inference_image": SERVING_IMAGE}
    )
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in ("plan", "train", "evaluate", "gate", "register"):
        assert states[f"sagemaker.{task}"] == "success", states
    assert states["local.plan"] == "skipped"

    sm = endpoint.client("sagemaker")
    [job] = sm.list_training_jobs()["TrainingJobSummaries"]
    desc = sm.describe_training_job(TrainingJobName=job["TrainingJobName"])
    assert desc["TrainingJobStatus"] == "Completed"
    assert desc["HyperParameters"]["epochs"] == "4"  # the trigger form's value reached the job
    model = desc["ModelArtifacts"]["S3ModelArtifacts"]
    assert s3.head_object(Bucket=DEMO_BUCKET, Key=model.split(f"{DEMO_BUCKET}/", 1)[1])

    [processing] = sm.list_processing_jobs()["ProcessingJobSummaries"]
    evaluation = sm.describe_processing_job(ProcessingJobName=processing["ProcessingJobName"])
    assert evaluation["ProcessingJobStatus"] == "Completed"
    assert evaluation["ProcessingInputs"][0]["S3Input"]["S3Uri"] == model
    output = evaluation["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"]
    evaluation_uri = f"{output}/evaluation.json"
    report = json.loads(
        s3.get_object(Bucket=DEMO_BUCKET, Key=evaluation_uri.split(f"{DEMO_BUCKET}/", 1)[1])["Body"].read()
    )
    assert report["metrics"]["accuracy"] >= 0.8  # the gate's threshold: it passed on real metrics

    [package] = sm.list_model_packages(ModelPackageGroupName="adt-demo")["ModelPackageSummaryList"]
    detail = sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])
    assert detail["ModelApprovalStatus"] == "Approved"
    container = detail["InferenceSpecification"]["Containers"][0]
    assert container["Image"] == SERVING_IMAGE  # the form's inference image, not the training image
    assert container["ModelDataUrl"] == model
    assert detail["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"] == evaluation_uri


def test_yaml_pipeline_on_sagemaker_runs_end_to_end(
    aws_default_on_endpoint: Any,
    demo_data: Path,
    airflow_db: Path,
    tmp_path: Path,
) -> None:
    """``demo_mlp_local.yaml`` with ``backend: sagemaker`` (and a model package group): the same
    pipeline file, on the endpoint. Its staging step is dropped: FSx is not emulated, and the
    training data is already in the endpoint's S3."""
    import yaml

    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=DEMO_BUCKET)
    s3.upload_file(str(demo_data / "train" / "data.csv"), DEMO_BUCKET, "data/train/data.csv")
    source = REPO / "dags" / "pipelines" / "demo_mlp_local.yaml"
    pipeline = yaml.safe_load(source.read_text())
    pipeline.pop("staging")
    # The demo spec's relative paths are meant for the DAG's base_dir (the repo root); a pipeline
    # resolves a referenced spec's paths against the spec's own folder, so this copy makes them absolute.
    spec_file = tmp_path / "local_demo.yaml"
    spec_text = (REPO / "examples" / "specs" / "local_demo.yaml").read_text()
    spec_file.write_text(spec_text.replace("source_dir: examples", f"source_dir: {REPO / 'examples'}"))
    pipeline.update(
        {
            "dag_id": "demo_mlp_yaml_on_sagemaker",
            "backend": "sagemaker",
            "training": str(spec_file),
            "evaluation": {
                "script": str(REPO / "examples" / "evaluate.py"),
                "channel_source": str(demo_data / "test"),
            },
            "registry": {"model_package_group": "demo-mlp-yaml", "auto_approve": True},
        }
    )
    (tmp_path / "demo_mlp_sagemaker.yaml").write_text(yaml.safe_dump(pipeline))
    # `airflow dags test`, as a user runs it: a DAGs folder with this pipeline and its stub, and a
    # copy of the migrated metadata DB
    dags = tmp_path / "dags"
    dags.mkdir()
    (tmp_path / "demo_mlp_sagemaker.yaml").rename(dags / "demo_mlp_sagemaker.yaml")
    stub = f"from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__, base_dir={str(REPO)!r})\n"
    (dags / "demo_mlp_sagemaker.py").write_text(stub)
    with (
        contextlib.closing(sqlite3.connect(airflow_db / "airflow.db")) as src,
        contextlib.closing(sqlite3.connect(tmp_path / "airflow.db")) as dst,
    ):
        src.backup(dst)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/airflow.db",
    }
    airflow = Path(sys.executable).parent / "airflow"
    proc = subprocess.run(
        [str(airflow), "dags", "test", "demo_mlp_yaml_on_sagemaker", "-c", '{"epochs": 4}'],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, "\n".join(
        line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line.lower() or "Error" in line
    )[-6000:]
    sm = endpoint.client("sagemaker")
    [job] = sm.list_training_jobs()["TrainingJobSummaries"]
    training = sm.describe_training_job(TrainingJobName=job["TrainingJobName"])
    assert training["TrainingJobStatus"] == "Completed"
    [processing] = sm.list_processing_jobs()["ProcessingJobSummaries"]
    assert (
        sm.describe_processing_job(ProcessingJobName=processing["ProcessingJobName"])["ProcessingJobStatus"]
        == "Completed"
    )
    [package] = sm.list_model_packages(ModelPackageGroupName="demo-mlp-yaml")["ModelPackageSummaryList"]
    detail = sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])
    # no inference image set anywhere: the training image, as planned for the region
    image = training["AlgorithmSpecification"]["TrainingImage"]
    assert detail["InferenceSpecification"]["Containers"][0]["Image"] == image
    assert detail["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"].endswith("/evaluation.json")
