"""The shipped retraining DAG with ``backend=sagemaker``, end to end on the SageMaker test endpoint.

The Airflow AWS connection points at the endpoint through its ``endpoint_url`` extra (as a user
would configure it). The run trains for real, uploads the model, runs the evaluation processing
job (the local evaluation script and data are uploaded to the run's S3 prefix), gates, and
registers a model package whose metrics point at the evaluation file; all asserted from the
endpoint's state.

The retraining run is a spot run, and its first job loses its capacity mid-epoch, after a periodic
(per-epoch) checkpoint: the endpoint's ``spot_interruption`` sends SIGTERM to the job's PID 1, the
shipped spec's ``launcher`` forwards it, and ``examples/train.py`` saves the step it is at
(``checkpointing.StopSignal``). The run's next job resumes from exactly that step, and the run's
summary says so.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.datasets import make_dataset

from .conftest import (
    REPO,
    assert_jobs_ran_in_the_job_environment,
    fast_polling,
    fsx_network,
    serve_dags_folder,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
DAG_FILE = REPO / "dags" / "distributed_retraining.py"
DEMO_BUCKET = "adt-demo-bucket"
STEP_SLEEP = 0.6  # train.py's test hook: 4 steps an epoch (400 rows, 2 processes) of ~0.6 s each
SERVING_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/adt-serve:1"


@pytest.fixture
def retraining_dag(demo_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow_dist_training.compat import DagBag
    from airflow_dist_training.spec import loading

    (tmp_path / "source").symlink_to(demo_data)
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    load_spec = loading.load_spec

    def with_slow_steps(source: Any) -> Any:  # the demo's steps take long enough to interrupt one
        spec = load_spec(source)
        if spec.name != "local-demo" or "step-sleep" in spec.hyperparameters:
            return spec
        data = spec.model_dump(mode="json", exclude_unset=True)
        data["hyperparameters"]["step-sleep"] = STEP_SLEEP
        return load_spec(data)

    monkeypatch.setattr(loading, "load_spec", with_slow_steps)
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return fast_polling(bag.dags["distributed_retraining"])


def _job_log(endpoint: Any, job: str) -> str:
    events = endpoint.client("logs").filter_log_events(
        logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=f"{job}/algo-1"
    )["events"]
    return "\n".join(e["message"] for e in events)


def _interrupt_after_the_first_periodic_checkpoint(endpoint: Any, interrupted: list[str]) -> None:
    """Once the run's first job has printed epoch 0 (its checkpoint follows at once), take its spot
    capacity away: the signal lands a step or more into epoch 1."""
    sm = endpoint.client("sagemaker")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        jobs = sm.list_training_jobs()["TrainingJobSummaries"]
        if jobs and "epoch=0 loss=" in _job_log(endpoint, jobs[0]["TrainingJobName"]):
            endpoint.inject("spot_interruption", job_name=jobs[0]["TrainingJobName"])
            interrupted.append(jobs[0]["TrainingJobName"])
            return
        time.sleep(0.1)


def test_retraining_dag_on_sagemaker_trains_evaluates_gates_and_registers(
    aws_default_on_endpoint: Any,
    retraining_dag: Any,
    demo_data: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=DEMO_BUCKET)  # the demo's bucket, seeded with its training data
    s3.upload_file(str(demo_data / "train" / "data.csv"), DEMO_BUCKET, "data/train/data.csv")

    interrupted: list[str] = []
    interrupter = threading.Thread(
        target=_interrupt_after_the_first_periodic_checkpoint, args=(endpoint, interrupted), daemon=True
    )
    interrupter.start()
    run = retraining_dag.test(
        run_conf={"backend": "sagemaker", "epochs": 4, "inference_image": SERVING_IMAGE, "spot": True}
    )
    interrupter.join(5)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    # watch_checkpoints too: a healthy job raises no checkpoint-stall alarm
    for task in ("plan", "train", "watch_checkpoints", "evaluate", "gate", "register"):
        assert states[f"sagemaker.{task}"] == "success", states
    assert states["local.plan"] == "skipped"

    # The spot interruption: the first job saved the step it was at, after epoch 0's checkpoint
    # (step 4) and before its next one; the run's next job resumed from exactly that step.
    sm = endpoint.client("sagemaker")
    assert interrupted, "the first job never trained an epoch"
    first = sm.describe_training_job(TrainingJobName=interrupted[0])
    assert (first["TrainingJobStatus"], first["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    saved = re.search(
        r"saved step (\d+) on SIGTERM \(epoch=(\d+), batch (\d+) of 4\)", _job_log(endpoint, interrupted[0])
    )
    assert saved is not None, _job_log(endpoint, interrupted[0])[-2000:]
    step, epoch, batch = (int(g) for g in saved.groups())
    # past the periodic checkpoint at step epoch * 4 (at least the first one), before the next
    assert epoch >= 1 and batch >= 1 and step == epoch * 4 + batch
    [job] = [
        j for j in sm.list_training_jobs()["TrainingJobSummaries"] if j["TrainingJobName"] != interrupted[0]
    ]
    assert f"resumed from this run's checkpoint step-{step:012d} " in _job_log(
        endpoint, job["TrainingJobName"]
    )
    assert f"The job resumes from step {step}" in capfd.readouterr().out  # the training task's log
    summary = (tmp_path / "last-run-summary.txt").read_text()  # what the summary task printed
    assert (
        f"Resumed             from step {step} after a spot interruption of job {interrupted[0]}" in summary
    )

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
    # training and evaluation ran in what the image has: the job environment, nothing of the provider
    assert_jobs_ran_in_the_job_environment(endpoint)


def test_yaml_pipeline_on_sagemaker_stages_through_fsx_and_retrains_over_three_runs(
    aws_default_on_endpoint: Any,
    demo_data: Path,
    airflow_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """``demo_mlp_local.yaml`` with ``backend: sagemaker``, WITH its staging step: on SageMaker the
    staging step puts the dataset on FSx for Lustre (the endpoint's), and the job reads its FSx
    channel. The changes a SageMaker user makes to the local demo: the staged source is an S3 prefix,
    staging names the file system and path, the job gets the VPC that reaches it, and the model
    package group replaces the local registry folder.

    Issue 13's scenario on the YAML pipeline, three DAG runs against one model package group: run 1
    trains and registers v1; run 2 (same data, code, spec) is skipped saying why, no job, no
    package; run 3 (new data in the S3 source, staged again) trains all its epochs from scratch
    (the pipeline's ``warm_start: none``) and is compared with v1."""
    import yaml

    from airflow_dist_training.compat import DagBag

    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=DEMO_BUCKET)
    s3.upload_file(str(demo_data / "train" / "data.csv"), DEMO_BUCKET, "source/train/data.csv")
    net, fs = fsx_network(endpoint)
    pipeline = yaml.safe_load((REPO / "dags" / "pipelines" / "demo_mlp_local.yaml").read_text())
    training = pipeline["training"]
    training["source"]["source_dir"] = str(REPO / "examples")
    training["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    training["network"] = {"subnets": [net["subnet"]], "security_group_ids": [net["training_sg"]]}
    pipeline.update(
        {
            "dag_id": "demo_mlp_yaml_on_sagemaker",
            "backend": "sagemaker",
            "staging": {
                **pipeline["staging"],
                "source": f"s3://{DEMO_BUCKET}/source/train/",
                "file_system_id": fs["FileSystemId"],
                "file_system_path": "/demo/train",
            },
            "checkpoints": {**pipeline["checkpoints"], "promote_to": f"s3://{DEMO_BUCKET}/promoted/"},
            "evaluation": {
                "script": str(REPO / "examples" / "evaluate.py"),
                "channel_source": str(demo_data / "test"),
                "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
            },
            "registry": {"model_package_group": "demo-mlp-yaml", "auto_approve": True},
        }
    )
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "demo_mlp_yaml_on_sagemaker.yaml").write_text(yaml.safe_dump(pipeline))
    (dags / "demo_mlp_yaml_on_sagemaker.py").write_text(
        "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
    )
    serve_dags_folder(dags, monkeypatch)
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    dag = fast_polling(bag.dags["demo_mlp_yaml_on_sagemaker"])

    run = dag.test(run_conf={"epochs": 4})
    states = {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in ("plan", "stage", "check_changes", "train", "watch_checkpoints", "evaluate", "gate", "register"):
        assert states[task] == "success", (task, states)

    [task] = endpoint.client("fsx").describe_data_repository_tasks()["DataRepositoryTasks"]
    assert (task["Type"], task["Lifecycle"], task["Paths"]) == (
        "IMPORT_METADATA_FROM_REPOSITORY",
        "SUCCEEDED",
        [f"s3://{DEMO_BUCKET}/source/train/"],
    )
    sm = endpoint.client("sagemaker")
    [job] = sm.list_training_jobs()["TrainingJobSummaries"]
    training_job = sm.describe_training_job(TrainingJobName=job["TrainingJobName"])
    assert training_job["TrainingJobStatus"] == "Completed"
    [channel] = [c for c in training_job["InputDataConfig"] if c["ChannelName"] == "train"]
    mount = fs["LustreConfiguration"]["MountName"]
    assert channel["DataSource"]["FileSystemDataSource"]["DirectoryPath"] == f"/{mount}/demo/train"
    [processing] = sm.list_processing_jobs()["ProcessingJobSummaries"]
    assert (
        sm.describe_processing_job(ProcessingJobName=processing["ProcessingJobName"])["ProcessingJobStatus"]
        == "Completed"
    )
    [package] = sm.list_model_packages(ModelPackageGroupName="demo-mlp-yaml")["ModelPackageSummaryList"]
    detail = sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])
    # no inference image set anywhere: the training image, as planned for the region
    image = training_job["AlgorithmSpecification"]["TrainingImage"]
    assert detail["InferenceSpecification"]["Containers"][0]["Image"] == image
    assert detail["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"].endswith("/evaluation.json")
    fingerprint = detail["CustomerMetadataProperties"]["DataFingerprint"]

    # Run 2: the same data (staged again), code and spec: skipped with the reason; nothing created.
    capfd.readouterr()
    run = dag.test(run_conf={"epochs": 4})
    states = {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    assert states["stage"] == states["check_changes"] == "success", states
    for task in ("train", "watch_checkpoints", "evaluate", "gate", "register"):
        assert states[task] == "skipped", (task, states)
    short = fingerprint.removeprefix("sha256:")[:12]
    assert (
        f"no new data or code since champion demo-mlp-yaml/1 (data fingerprint {short}" in capfd.readouterr().out
    )
    assert len(sm.list_training_jobs()["TrainingJobSummaries"]) == 1
    assert len(sm.list_processing_jobs()["ProcessingJobSummaries"]) == 1
    assert len(sm.list_model_packages(ModelPackageGroupName="demo-mlp-yaml")["ModelPackageSummaryList"]) == 1

    # Run 3: new data in the S3 source (the generator with another seed): all epochs, from scratch.
    new = tmp_path / "new-data"
    make_dataset(new, seed=7)
    s3.upload_file(str(new / "train" / "data.csv"), DEMO_BUCKET, "source/train/data.csv")
    run = dag.test(run_conf={"epochs": 4})
    states = {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in ("stage", "check_changes", "train", "evaluate", "gate"):
        assert states[task] == "success", (task, states)
    jobs = sm.list_training_jobs()["TrainingJobSummaries"]
    assert len(jobs) == 2
    [job3] = [j for j in jobs if j["TrainingJobName"] != job["TrainingJobName"]]
    events = endpoint.client("logs").filter_log_events(
        logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=f"{job3['TrainingJobName']}/algo-1"
    )["events"]
    log3 = "".join(e["message"] for e in events)
    assert "no checkpoint found: starting from scratch" in log3 and "warm start" not in log3
    assert "run_summary epochs_trained=4 " in log3 and "warm_started=0" in log3
    desc3 = sm.describe_training_job(TrainingJobName=job3["TrainingJobName"])
    assert "warm_start" not in {c["ChannelName"] for c in desc3["InputDataConfig"]}
    assert desc3["CheckpointConfig"]["S3Uri"] != training_job["CheckpointConfig"]["S3Uri"]  # run-scoped
    # every run staged: one association, reused; one import per run
    fsx = endpoint.client("fsx")
    [assoc] = fsx.describe_data_repository_associations()["Associations"]
    assert assoc["DataRepositoryPath"] == f"s3://{DEMO_BUCKET}/source/train/"
    tasks = fsx.describe_data_repository_tasks()["DataRepositoryTasks"]
    assert [(t["Type"], t["Lifecycle"]) for t in tasks] == [("IMPORT_METADATA_FROM_REPOSITORY", "SUCCEEDED")] * 3
    packages = sm.list_model_packages(ModelPackageGroupName="demo-mlp-yaml")["ModelPackageSummaryList"]
    if states["register"] == "success":  # the gate passed: v2, compared with v1, on new data
        assert len(packages) == 2
        latest = max(packages, key=lambda p: p["ModelPackageVersion"])
        meta = sm.describe_model_package(ModelPackageName=latest["ModelPackageArn"])["CustomerMetadataProperties"]
        assert meta["ChampionComparedWith"] == package["ModelPackageArn"]
        assert meta["DataFingerprint"] != fingerprint
        assert meta["TrainingJobName"] == job3["TrainingJobName"]
    else:  # rejected by the gate (on the new data's metrics), with the reason
        assert states["register"] == "skipped" and len(packages) == 1
    assert_jobs_ran_in_the_job_environment(endpoint)  # every training and evaluation job of the 3 runs
