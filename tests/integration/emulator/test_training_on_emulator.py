"""Real training jobs on the SageMaker test endpoint, through the SageMaker backend.

Each test runs ``DistributedTrainingOperator(backend="sagemaker")`` against the emulator: the
operator uploads the code, sends ``CreateTrainingJob``, waits (deferred: the trigger really runs,
streaming CloudWatch logs), and the endpoint runs the job's hosts with real torch.distributed on
CPU. Everything is asserted from the endpoint's state (DescribeTrainingJob, S3, CloudWatch Logs).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.operators.training import DistributedTrainingOperator

from .conftest import BUCKET, REPO

sys.path.insert(0, str(REPO / "tests" / "integration" / "training"))
from fake_sagemaker_training import make_context

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


def spec(name: str, *, hosts: int = 1, strategy: str = "launcher", **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "role_arn": ROLE,
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {
            "entry_point": "train.py",
            "source_dir": str(REPO / "examples"),
            # train.py imports it; the job's image has nothing of this provider
            "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
        },
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": hosts},
        "distribution": {"strategy": "launcher", "launcher": "torchrun", "processes_per_host": 2},
        "hyperparameters": {"epochs": 2, "batch-size": 64, "hidden": 16},
        "channels": {"train": {"type": "s3", "uri": f"s3://{BUCKET}/data/train"}},
        "output": {"s3_path": f"s3://{BUCKET}/models"},
        "checkpoint": {"s3_uri": f"s3://{BUCKET}/checkpoints/{name}"},
        "metric_definitions": [
            {"name": "train:loss", "regex": "epoch=\\d+ loss=([0-9.]+)"},
            {"name": "train:accuracy", "regex": "accuracy=([0-9.]+)"},
        ],
        "stopping": {"max_runtime_seconds": 600},
    }
    if strategy == "torch_distributed":
        data["compute"]["instance_type"] = "ml.g5.2xlarge"
        data["distribution"] = {"strategy": "torch_distributed"}
    data.update(overrides)
    return data


@pytest.fixture
def endpoint(sagemaker_endpoint: Any, demo_data: Path) -> Any:
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(demo_data / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    return sagemaker_endpoint


def operator(spec_data: dict[str, Any], **kwargs: Any) -> DistributedTrainingOperator:
    op = DistributedTrainingOperator(
        task_id="train",
        spec=spec_data,
        backend="sagemaker",
        aws_conn_id=None,
        region_name="us-east-1",
        poll_interval=0.5,
        **{"deferrable": True, **kwargs},
    )
    op.hook.throttle_base_delay = 0.05
    return op


def first_event(trigger: Any) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(run())


def run_task(op: Any, ctx: dict[str, Any]) -> Any:
    """Run an operator as Airflow would: execute, then each deferral's trigger and resume method."""
    from airflow_dist_training.compat import TaskDeferred

    call: Any = lambda: op.execute(ctx)  # noqa: E731
    while True:
        try:
            return call()
        except TaskDeferred as deferred:
            event = first_event(deferred.trigger)
            method = getattr(op, deferred.method_name)
            call = lambda m=method, e=event, kw=deferred.kwargs or {}: m(ctx, event=e, **kw)  # noqa: E731


def log_lines(endpoint: Any, job: str) -> dict[str, list[str]]:
    logs = endpoint.client("logs")
    streams = logs.describe_log_streams(
        logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=f"{job}/"
    )
    return {
        s["logStreamName"]: [
            e["message"]
            for e in logs.get_log_events(
                logGroupName="/aws/sagemaker/TrainingJobs",
                logStreamName=s["logStreamName"],
                startFromHead=True,
            )["events"]
        ]
        for s in streams["logStreams"]
    }


def test_two_host_torchrun_job_runs_for_real_deferred(
    endpoint: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_task(
        operator(spec("emu-ddp", hosts=2, strategy="torch_distributed")), make_context("run-ddp")
    )
    name = result["job_name"]
    desc = endpoint.client("sagemaker").describe_training_job(TrainingJobName=name)
    assert desc["TrainingJobStatus"] == "Completed" and desc["SecondaryStatus"] == "Completed"
    assert [t["Status"] for t in desc["SecondaryStatusTransitions"]] == [
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    assert desc["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    metrics = {m["MetricName"]: m["Value"] for m in desc["FinalMetricDataList"]}
    assert set(metrics) == {"train:loss", "train:accuracy"} and metrics["train:loss"] > 0
    assert result["final_metrics"] == metrics
    # the model and output archives are in the endpoint's S3, where the request said
    keys = {
        o["Key"]
        for o in endpoint.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=f"models/{name}/")["Contents"]
    }
    assert {f"models/{name}/output/model.tar.gz", f"models/{name}/output/output.tar.gz"} <= keys
    assert result["model_artifact_uri"] == f"s3://{BUCKET}/models/{name}/output/model.tar.gz"
    # one log stream per host, <job>/algo-N-<epoch>; both hosts took part in the process group
    streams = log_lines(endpoint, name)
    hosts = sorted(s.split("/")[1].rsplit("-", 1)[0] for s in streams)
    assert hosts == ["algo-1", "algo-2"]
    assert any("loss=" in line for lines in streams.values() for line in lines)
    # the trigger streamed the job's CloudWatch logs and its status timeline into the task log
    out = capfd.readouterr().out
    assert "[algo-1-" in out and "[algo-2-" in out and "Uploading" in out


def test_launcher_mode_job_with_a_synchronous_wait(endpoint: Any) -> None:
    op = operator(spec("emu-launcher"), deferrable=False)
    result = run_task(op, make_context("run-launcher"))
    desc = endpoint.client("sagemaker").describe_training_job(TrainingJobName=result["job_name"])
    assert desc["TrainingJobStatus"] == "Completed"
    # launcher mode: our entry point in the container, torchrun with 2 processes on the host
    assert desc["AlgorithmSpecification"].get("ContainerEntrypoint")
    # torchrun ran 2 processes on the host: the checkpoint it synced to S3 records world_size 2
    s3 = endpoint.client("s3")
    manifests = [
        o["Key"]
        for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="checkpoints/emu-launcher/")["Contents"]
        if o["Key"].endswith("_MANIFEST.json")
    ]
    assert manifests
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=manifests[-1])["Body"].read())
    assert manifest["world_size"] == 2


def test_failing_job_shows_its_failure_reason(endpoint: Any) -> None:
    data = spec("emu-fail", hyperparameters={"epochs": 3, "fail-at-epoch": 1})
    with pytest.raises(TrainingJobError) as failed:
        run_task(operator(data), make_context("run-fail"))
    name = failed.value.job_name
    desc = endpoint.client("sagemaker").describe_training_job(TrainingJobName=name)
    assert desc["TrainingJobStatus"] == "Failed"
    assert desc["FailureReason"].startswith("AlgorithmError")
    # what the task log shows: the job, its status and the reason from /opt/ml/output/failure
    assert name in str(failed.value) and desc["FailureReason"][:60] in str(failed.value)


def test_killed_task_stops_the_job(endpoint: Any) -> None:
    from airflow_dist_training.compat import TaskDeferred

    op = operator(spec("emu-stop", hyperparameters={"epochs": 50, "epoch-sleep": 2}))
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(make_context("run-stop"))
    trigger = deferred.value.trigger
    name = trigger.job_name
    sm = endpoint.client("sagemaker")
    _wait_for(lambda: sm.describe_training_job(TrainingJobName=name)["SecondaryStatus"] == "Training")

    async def kill() -> None:  # the user marks the deferred task failed: the triggerer cancels it
        task = asyncio.ensure_future(first_event_async(trigger))
        await asyncio.sleep(1)
        task.cancel()
        await trigger.on_kill()

    asyncio.run(kill())
    _wait_for(lambda: sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "Stopped", 60)
    desc = sm.describe_training_job(TrainingJobName=name)
    assert desc["SecondaryStatus"] == "Stopped"
    assert endpoint.state()["training_jobs"][name] == "Stopped"


def test_spot_interruption_resumes_from_the_s3_checkpoint(endpoint: Any) -> None:
    data = spec(
        "emu-spot",
        hyperparameters={"epochs": 4, "epoch-sleep": 3},
        spot={"enabled": True, "max_wait_seconds": 1200},
    )
    op = operator(data)
    ctx = make_context("run-spot")
    s3 = endpoint.client("s3")
    sm = endpoint.client("sagemaker")
    interrupted: list[str] = []

    def interrupt_after_first_checkpoint() -> None:
        _wait_for(lambda: bool(sm.list_training_jobs()["TrainingJobSummaries"]), 60)
        first = sm.list_training_jobs()["TrainingJobSummaries"][0]["TrainingJobName"]
        _wait_for(
            lambda: any(
                o["Key"].endswith("_MANIFEST.json")
                for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="checkpoints/emu-spot").get("Contents", [])
            ),
            120,
        )
        endpoint.inject("spot_interruption", job_name=first)
        interrupted.append(first)

    killer = threading.Thread(target=interrupt_after_first_checkpoint, daemon=True)
    killer.start()
    result = run_task(op, ctx)
    killer.join(5)
    assert interrupted, "the spot interruption was never injected"
    first = sm.describe_training_job(TrainingJobName=interrupted[0])
    assert first["TrainingJobStatus"] == "Stopped" and first["SecondaryStatus"] == "MaxWaitTimeExceeded"
    # the run's next job resumed from the checkpoint the first one synced to S3, and completed
    assert result["job_name"] != interrupted[0] and result["status"] == "Completed"
    lines = [line for lines in log_lines(endpoint, result["job_name"]).values() for line in lines]
    assert any("resumed from this run's checkpoint" in line for line in lines), lines[:40]


async def first_event_async(trigger: Any) -> Any:
    async for event in trigger.run():
        return event


def _wait_for(predicate: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError("condition not reached in time")
