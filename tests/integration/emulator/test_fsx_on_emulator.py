"""The shipped FSx pipeline (``dags/pipelines/llm_finetune_sagemaker.yaml``) end to end on the endpoint.

The endpoint's FSx for Lustre: a file system in the training subnet's AZ whose security group
opens the Lustre ports to the training security group. The pipeline's staging step runs the
pre-flight, links ``/datasets/train`` to the S3 dataset prefix (a data repository association)
and imports it; the training job gets an FSx channel and reads the imported files. (Later runs
reuse the association and import again: the demo YAML pipeline's three runs on the endpoint,
``test_dags_on_emulator.py``, show that.)

The only edits to the shipped files: the placeholder AWS ids (file system, subnet, security group)
become the endpoint's, as a user puts their own; the run conf sets the demo's learning rate.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    REPO,
    assert_jobs_ran_in_the_job_environment,
    fast_polling,
    fsx_network,
    serve_dags_folder,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
BUCKET = "my-ml-bucket"
PIPELINE = REPO / "dags" / "pipelines" / "llm_finetune_sagemaker.yaml"
SPEC = REPO / "examples" / "specs" / "torch_distributed_p4d.yaml"


def _seed_bucket(endpoint: Any, demo_data: Path) -> None:
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(REPO / "examples" / "train.py", arcname="train.py")
        # train.py imports it; the job's image has nothing of this provider
        tar.add(REPO / "airflow_dist_training" / "checkpointing.py", arcname="checkpointing.py")
    s3.put_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz", Body=buf.getvalue())
    s3.upload_file(str(demo_data / "train" / "data.csv"), BUCKET, "datasets/train/data.csv")
    s3.upload_file(str(demo_data / "test" / "data.csv"), BUCKET, "datasets/test/data.csv")


def _pipeline_dag(tmp_path: Path, ids: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The shipped pipeline and its spec, with the endpoint's ids in place of the placeholders."""
    from airflow_dist_training.compat import DagBag

    def swap(text: str) -> str:
        return (
            text.replace("fs-0123456789abcdef0", ids["fs"])
            .replace("subnet-0a1b2c3d", ids["subnet"])
            .replace("sg-0a1b2c3d", ids["training_sg"])
        )

    dags = tmp_path / "dags"
    dags.mkdir()
    spec = tmp_path / "torch_distributed_p4d.yaml"
    spec.write_text(swap(SPEC.read_text()))
    pipeline = (
        swap(PIPELINE.read_text())
        .replace("../../examples/specs/torch_distributed_p4d.yaml", str(spec))
        .replace("../../", f"{REPO}/")  # the evaluation script and its dependencies, from the repository
    )
    assert ids["fs"] in pipeline and str(spec) in pipeline
    (dags / "llm_finetune_sagemaker.yaml").write_text(pipeline)
    (dags / "llm_finetune_sagemaker.py").write_text(
        (REPO / "dags" / "pipelines" / "llm_finetune_sagemaker.py").read_text()
    )
    serve_dags_folder(dags, monkeypatch)
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    return fast_polling(bag.dags["llm_finetune_sagemaker"])


def test_fsx_pipeline_stages_through_fsx_and_trains_on_the_channel(
    sagemaker_endpoint: Any,
    demo_data: Path,
    airflow_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = sagemaker_endpoint
    _seed_bucket(endpoint, demo_data)
    net, fs = fsx_network(endpoint)
    fsx = endpoint.client("fsx")
    mount = fs["LustreConfiguration"]["MountName"]
    dag = _pipeline_dag(tmp_path, {**net, "fs": fs["FileSystemId"]}, monkeypatch)
    sm = endpoint.client("sagemaker")
    source_rows = len((demo_data / "train" / "data.csv").read_text().splitlines()) - 1

    run = dag.test(run_conf={"learning_rate": 0.05})  # the spec's 3 epochs
    states = {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in ("plan", "stage", "train", "evaluate", "gate", "register"):
        assert states[task] == "success", (task, states)

    [job] = sm.list_training_jobs()["TrainingJobSummaries"]
    name = job["TrainingJobName"]
    desc = sm.describe_training_job(TrainingJobName=name)
    assert desc["TrainingJobStatus"] == "Completed"
    [channel] = desc["InputDataConfig"]
    assert channel["ChannelName"] == "train"
    assert channel["DataSource"] == {
        "FileSystemDataSource": {
            "FileSystemId": fs["FileSystemId"],
            "FileSystemAccessMode": "ro",
            "FileSystemType": "FSxLustre",
            "DirectoryPath": f"/{mount}/datasets/train",
        }
    }
    assert desc["VpcConfig"] == {"SecurityGroupIds": [net["training_sg"]], "Subnets": [net["subnet"]]}
    # the data the job saw: the S3 dataset, through the association and the import task
    events = endpoint.client("logs").filter_log_events(
        logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=f"{name}/algo-1"
    )["events"]
    assert f"train data: {source_rows} rows from /opt/ml/input/data/train" in "".join(
        e["message"] for e in events
    )

    [assoc] = fsx.describe_data_repository_associations()["Associations"]
    assert (assoc["FileSystemPath"], assoc["DataRepositoryPath"]) == (
        "/datasets/train",
        f"s3://{BUCKET}/datasets/train/",
    )
    tasks = fsx.describe_data_repository_tasks()["DataRepositoryTasks"]
    assert [(t["Type"], t["Lifecycle"], t["Status"]["SucceededCount"]) for t in tasks] == [
        ("IMPORT_METADATA_FROM_REPOSITORY", "SUCCEEDED", 1)
    ]
    packages = sm.list_model_packages(ModelPackageGroupName="llm-finetune")["ModelPackageSummaryList"]
    assert [p["ModelApprovalStatus"] for p in packages] == ["PendingManualApproval"]
    assert_jobs_ran_in_the_job_environment(endpoint)


def test_fsx_channel_on_a_missing_file_system_is_refused(sagemaker_endpoint: Any) -> None:
    """CreateTrainingJob with an FSx channel the endpoint cannot mount answers ValidationException
    naming it, and records no job."""
    import botocore.exceptions

    sm = sagemaker_endpoint.client("sagemaker")
    request = {
        "TrainingJobName": "fsx-missing",
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
            "TrainingInputMode": "File",
        },
        "HyperParameters": {"sagemaker_program": json.dumps("train.py")},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "FileSystemDataSource": {
                        "FileSystemId": "fs-0123456789abcdef0",
                        "FileSystemAccessMode": "ro",
                        "FileSystemType": "FSxLustre",
                        "DirectoryPath": "/abcdefgh/datasets/train",
                    }
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://b/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "VpcConfig": {"SecurityGroupIds": ["sg-0a1b2c3d"], "Subnets": ["subnet-0a1b2c3d"]},
    }
    with pytest.raises(botocore.exceptions.ClientError) as err:
        sm.create_training_job(**request)
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "file system fs-0123456789abcdef0 does not exist" in str(err.value)
    assert sm.list_training_jobs()["TrainingJobSummaries"] == []


def test_fsx_associations_and_tasks_move_data_between_s3_and_the_file_system(sagemaker_endpoint: Any) -> None:
    """The data repository calls moto lacks: an import brings new and deleted objects, an export
    writes files back, overlapping associations are refused, unknown ids answer AWS's errors."""
    import botocore.exceptions

    endpoint = sagemaker_endpoint
    s3, fsx = endpoint.client("s3"), endpoint.client("fsx")
    _, fs = fsx_network(endpoint)
    fs_id = fs["FileSystemId"]
    assert fs["Lifecycle"] == "CREATING"  # as AWS answers a create; AVAILABLE afterwards
    assert fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"][0]["Lifecycle"] == "AVAILABLE"
    s3.create_bucket(Bucket="fsx-data")
    s3.put_object(Bucket="fsx-data", Key="train/a.csv", Body=b"a\n")
    s3.put_object(Bucket="fsx-data", Key="train/sub/b.csv", Body=b"b\n")
    assoc = fsx.create_data_repository_association(
        FileSystemId=fs_id, FileSystemPath="/data", DataRepositoryPath="s3://fsx-data/train/"
    )["Association"]
    with pytest.raises(botocore.exceptions.ClientError, match="overlaps /data"):
        fsx.create_data_repository_association(
            FileSystemId=fs_id, FileSystemPath="/data/inner", DataRepositoryPath="s3://fsx-data/other/"
        )

    def run(kind: str, paths: list[str]) -> dict[str, Any]:
        task = fsx.create_data_repository_task(
            Type=kind, FileSystemId=fs_id, Paths=paths, Report={"Enabled": False}
        )["DataRepositoryTask"]
        return fsx.describe_data_repository_tasks(TaskIds=[task["TaskId"]])["DataRepositoryTasks"][0]

    folder = endpoint.root / "fsx" / fs_id / "data"
    done = run("IMPORT_METADATA_FROM_REPOSITORY", ["s3://fsx-data/train/"])
    assert (done["Lifecycle"], done["Status"]["SucceededCount"]) == ("SUCCEEDED", 2)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.csv")) == ["a.csv", "sub/b.csv"]
    s3.delete_object(Bucket="fsx-data", Key="train/a.csv")
    assert run("IMPORT_METADATA_FROM_REPOSITORY", [])["Status"]["SucceededCount"] == 1
    assert not (folder / "a.csv").exists()  # an import brings deletions too

    (folder / "out.txt").write_text("written by a job")
    exported = run("EXPORT_TO_REPOSITORY", ["data"])
    assert (exported["Lifecycle"], exported["Status"]["SucceededCount"]) == ("SUCCEEDED", 2)
    assert s3.get_object(Bucket="fsx-data", Key="train/out.txt")["Body"].read() == b"written by a job"
    with pytest.raises(botocore.exceptions.ClientError, match="DataRepositoryTaskEnded"):
        fsx.cancel_data_repository_task(TaskId=exported["TaskId"])
    with pytest.raises(botocore.exceptions.ClientError, match="FileSystemNotFound"):
        fsx.describe_file_systems(FileSystemIds=["fs-0123456789abcdef0"])
    assert (
        fsx.describe_data_repository_associations(AssociationIds=[assoc["AssociationId"]])["Associations"][0][
            "Lifecycle"
        ]
        == "AVAILABLE"
    )
