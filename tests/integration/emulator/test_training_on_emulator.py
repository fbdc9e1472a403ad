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


def test_a_hugging_face_trainer_spot_interrupted_mid_save_resumes_from_its_last_complete_checkpoint(
    endpoint: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """examples/hf_trainer/train.py, unchanged, in the huggingface job environment (the image's). The
    first job stalls half-way through writing checkpoint-6 (fault injection); SageMaker's sync has
    put its weights and optimizer in S3, and the spot capacity is reclaimed then. The run's next job
    resumes from checkpoint-4, after the relaunch step moved the partial checkpoint-6 aside."""
    from tests.killed_mid_save import HF_IMAGE, HYPERPARAMETERS, hf_trainer_source

    data = spec(
        "emu-hf",
        image=HF_IMAGE,
        source={
            "entry_point": "killed_mid_save.py",
            "source_dir": str(hf_trainer_source(tmp_path, "time.sleep(600)")),
        },
        compute={"instance_type": "ml.g5.xlarge", "instance_count": 1},
        hyperparameters=HYPERPARAMETERS,
        channels={},
        metric_definitions=[],
        checkpoint={"s3_uri": f"s3://{BUCKET}/checkpoints/emu-hf", "layout": "hf-trainer"},
        spot={"enabled": True, "max_wait_seconds": 1200},
    )
    data.pop("distribution")  # the toolkit runs the script as `python train.py ...`, one process
    s3 = endpoint.client("s3")
    sm = endpoint.client("sagemaker")
    interrupted: list[str] = []

    def keys() -> list[str]:
        return [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="checkpoints/emu-hf/").get("Contents", [])]

    def interrupt_mid_save() -> None:
        _wait_for(lambda: bool(sm.list_training_jobs()["TrainingJobSummaries"]), 120)
        first = sm.list_training_jobs()["TrainingJobSummaries"][0]["TrainingJobName"]
        _wait_for(lambda: any(k.endswith("/checkpoint-6/optimizer.pt") for k in keys()), 300)
        endpoint.inject("spot_interruption", job_name=first)
        interrupted.append(first)

    killer = threading.Thread(target=interrupt_mid_save, daemon=True)
    killer.start()
    result = run_task(operator(data, checkpoint_resume="latest"), make_context("run-hf"))
    killer.join(5)
    assert interrupted, "the spot interruption was never injected"
    first = sm.describe_training_job(TrainingJobName=interrupted[0])
    assert first["TrainingJobStatus"] == "Stopped" and first["SecondaryStatus"] == "MaxWaitTimeExceeded"
    assert result["job_name"] != interrupted[0] and result["status"] == "Completed"
    run = f"checkpoints/emu-hf/{interrupted[0]}"
    task_log = capfd.readouterr().out
    moved = [line for line in task_log.splitlines() if "Moved the incomplete checkpoint" in line]
    assert len(moved) == 1, moved
    assert f"{run}/checkpoint-6/ aside to s3://{BUCKET}/{run}/_incomplete/checkpoint-6/" in moved[0], moved
    assert "checkpoint-6/: no trainer_state.json" in moved[0], moved
    assert "(hf-trainer, step 4)" in task_log
    lines = "\n".join(line for lines in log_lines(endpoint, result["job_name"]).values() for line in lines)
    assert "***** resuming from /opt/ml/checkpoints/checkpoint-4 *****" in lines
    assert "Continuing training from global step 4" in lines
    assert "trained to step 8" in lines and lines.count("{'loss': ") == 4  # steps 5-8 only
    found = set(keys())
    assert f"{run}/_incomplete/checkpoint-6/optimizer.pt" in found
    assert f"{run}/_incomplete/checkpoint-6/trainer_state.json" not in found
    for step in (2, 4, 6, 8):  # checkpoint-6 written again, whole, by the resumed job
        assert f"{run}/checkpoint-{step}/trainer_state.json" in found


def test_a_dcp_job_killed_mid_save_resumes_on_the_retry_from_its_last_complete_checkpoint(
    endpoint: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The shipped FSDP2 + DCP example (examples/dcp_fsdp/train.py, 2 ranks) saves every epoch;
    rank 0 is killed after both ranks' shards of step 12 are written and before its .metadata
    (tests/killed_mid_save.py). The job fails; the task's retry starts the run's next job, which
    resumes from step 8, never the partial step 12."""
    from tests.killed_mid_save import dcp_fsdp_source

    data = spec(
        "emu-dcp",
        source={"entry_point": "killed_mid_save.py", "source_dir": str(dcp_fsdp_source(tmp_path))},
        channels={},
        metric_definitions=[{"name": "train:loss", "regex": "epoch=\\d+ step=\\d+ loss=([0-9.]+)"}],
        hyperparameters={"epochs": 4, "steps_per_epoch": 4},
        checkpoint={"s3_uri": f"s3://{BUCKET}/checkpoints/emu-dcp", "layout": "dcp"},
    )
    with pytest.raises(TrainingJobError) as failed:
        run_task(operator(data, checkpoint_resume="latest"), make_context("run-dcp"))
    first_job = failed.value.job_name
    run = f"checkpoints/emu-dcp/{first_job}"
    s3 = endpoint.client("s3")

    def keys() -> set[str]:
        listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{run}/").get("Contents", [])
        return {o["Key"].removeprefix(f"{run}/") for o in listed}

    # what the failed job's hosts synced: both ranks' shards of step 12, and no .metadata
    assert {"step-000000000012/__0_0.distcp", "step-000000000012/__1_0.distcp"} <= keys()
    assert "step-000000000012/.metadata" not in keys() and "step-000000000008/.metadata" in keys()
    capfd.readouterr()

    result = run_task(operator(data, checkpoint_resume="latest"), make_context("run-dcp"))  # the retry
    assert result["status"] == "Completed" and result["job_name"] != first_job
    task_log = capfd.readouterr().out
    moved = [line for line in task_log.splitlines() if "Moved the incomplete checkpoint" in line]
    assert len(moved) == 1 and f"{run}/step-000000000012/ aside to s3://{BUCKET}/{run}/_incomplete/" in moved[0], moved
    lines = "\n".join(line for lines in log_lines(endpoint, result["job_name"]).values() for line in lines)
    assert "rank 0 resumed from step-000000000008 (epoch=1, step=8)" in lines
    assert "rank 1 resumed from step-000000000008 (epoch=1, step=8)" in lines
    assert "epoch=0 step=4 loss=" not in lines and "epoch=3 step=16 loss=" in lines
    after = keys()
    assert {"step-000000000012/.metadata", "step-000000000016/.metadata"} <= after  # written whole by the retry
    assert "_incomplete/step-000000000012/__1_0.distcp" in after


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
