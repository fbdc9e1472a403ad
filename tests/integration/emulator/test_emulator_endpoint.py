"""The endpoint itself: CLI lifecycle (clean stop, no process left), duplicate names, faults, limits."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.emulator.pytest_plugin import EmulatorProcess
from airflow_dist_training.errors import CapacityError, TrainingJobError

from .conftest import BUCKET, REPO
from .test_training_on_emulator import _wait_for, make_context, operator, run_task, spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _processes_under(root: Path) -> list[int]:
    """PIDs whose command line or working directory is inside ``root`` (the jobs' hosts)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if str(root) in cmdline or cwd.startswith(str(root)):
            found.append(int(pid))
    return found


def _create_job(endpoint: Any, data_dir: Path, name: str, **spec_overrides: Any) -> dict[str, Any]:
    from airflow_dist_training.sagemaker.request import plan_training_job
    from airflow_dist_training.source_archive import pack_source_dir
    from airflow_dist_training.spec.loading import load_spec

    s3, sm = endpoint.client("s3"), endpoint.client("sagemaker")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(data_dir / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    plan = plan_training_job(load_spec(spec(name, **spec_overrides)), job_name=name, region="us-east-1")
    for upload in plan.uploads:
        bucket, key = upload.s3_uri[len("s3://") :].split("/", 1)
        body = upload.content if upload.content is not None else pack_source_dir(upload.local_path, upload.dependencies)
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    sm.create_training_job(**plan.request)
    return plan.request


def test_cli_stops_cleanly_on_sigint_leaving_no_process(tmp_path: Path, demo_data: Path) -> None:
    emulator = EmulatorProcess(tmp_path)
    try:
        assert emulator.endpoint.startswith("http://127.0.0.1:")
        request = _create_job(
            emulator, demo_data, "emu-cli", hyperparameters={"epochs": 100, "epoch-sleep": 2}
        )
        sm = emulator.client("sagemaker")
        with pytest.raises(sm.exceptions.ClientError, match="ResourceInUse"):
            sm.create_training_job(**request)  # a duplicate name, as on AWS
        _wait_for(
            lambda: sm.describe_training_job(TrainingJobName="emu-cli")["SecondaryStatus"] == "Training"
        )
        _wait_for(lambda: bool(_processes_under(tmp_path / "jobs")), 60)
        hosts = _processes_under(tmp_path / "jobs")
        emulator.proc.send_signal(signal.SIGINT)
        assert emulator.proc.wait(60) == 0
    finally:
        emulator.stop()
    time.sleep(0.5)
    assert [p for p in hosts if Path(f"/proc/{p}").exists()] == []
    assert _processes_under(tmp_path / "jobs") == []


def test_capacity_fault_fails_the_job_as_a_capacity_error(sagemaker_endpoint: Any, demo_data: Path) -> None:
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(demo_data / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    sagemaker_endpoint.inject("insufficient_capacity", count=1)
    with pytest.raises(CapacityError) as raised:
        run_task(operator(spec("emu-capacity")), make_context("run-capacity"))
    desc = sagemaker_endpoint.client("sagemaker").describe_training_job(TrainingJobName=raised.value.job_name)
    assert desc["TrainingJobStatus"] == "Failed"
    assert "InsufficientCapacityError" in desc["FailureReason"]


def test_throttled_sagemaker_calls_are_retried(sagemaker_endpoint: Any) -> None:
    from airflow_dist_training.hooks.training import SageMakerTrainingHook

    sagemaker_endpoint.inject("throttle", share=0.4)
    hook = SageMakerTrainingHook(aws_conn_id=None, region_name="us-east-1", max_attempts=1)
    hook.throttle_base_delay = 0.01
    for _ in range(4):
        assert hook.describe_training_job_or_none("no-such-job") is None
    assert sagemaker_endpoint.state()["throttled_calls"] > 0


def test_max_runtime_is_enforced(sagemaker_endpoint: Any, demo_data: Path) -> None:
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(demo_data / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    data = spec(
        "emu-runtime", hyperparameters={"epochs": 100, "epoch-sleep": 2}, stopping={"max_runtime_seconds": 10}
    )
    with pytest.raises(TrainingJobError):
        run_task(operator(data), make_context("run-runtime"))
    [summary] = sagemaker_endpoint.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    desc = sagemaker_endpoint.client("sagemaker").describe_training_job(
        TrainingJobName=summary["TrainingJobName"]
    )
    assert desc["SecondaryStatus"] == "MaxRuntimeExceeded"
    assert desc["TrainingJobStatus"] in ("Failed", "Stopped")


def test_max_wait_is_validated_as_sagemaker_does(sagemaker_endpoint: Any, demo_data: Path) -> None:
    """CreateTrainingJob refuses MaxWaitTimeInSeconds without spot, or below MaxRuntimeInSeconds."""
    from botocore.exceptions import ClientError

    request = _create_job(
        sagemaker_endpoint,
        demo_data,
        "emu-wait-ok",
        spot={"enabled": True, "max_wait_seconds": 600},
        stopping={"max_runtime_seconds": 600},
        hyperparameters={"epochs": 1},
    )
    sm = sagemaker_endpoint.client("sagemaker")
    spot_off = {k: v for k, v in request.items() if k != "EnableManagedSpotTraining"}
    cases = {
        "emu-wait-no-spot": (spot_off, "It is only supported when EnableManagedSpotTraining is set to true"),
        "emu-wait-short": (
            {**request, "StoppingCondition": {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 599}},
            "It must be present and be greater than or equal to MaxRuntimeInSeconds",
        ),
        "emu-wait-missing": (
            {**request, "StoppingCondition": {"MaxRuntimeInSeconds": 600}},
            "It must be present and be greater than or equal to MaxRuntimeInSeconds",
        ),
    }
    for name, (bad, message) in cases.items():
        with pytest.raises(ClientError) as refused:
            sm.create_training_job(**{**bad, "TrainingJobName": name})
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert refused.value.response["Error"]["Message"] == f"Invalid MaxWaitTimeInSeconds. {message}"
    # the valid spot request was accepted and runs; nothing was created for the refused ones
    assert [j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]] == ["emu-wait-ok"]


def test_max_wait_stops_a_spot_job_and_keeps_its_checkpoints(
    sagemaker_endpoint: Any, demo_data: Path
) -> None:
    """MaxWaitTimeInSeconds counts the wait for spot capacity and the training: past it the job is
    stopped (SIGTERM, the grace) and ends Stopped / MaxWaitTimeExceeded; its checkpoints are in S3."""
    from airflow_dist_training.emulator.faults import MAX_WAIT_MESSAGE

    sagemaker_endpoint.inject("spot_capacity_wait", seconds=4)
    name = "emu-max-wait"
    # MaxRuntime = MaxWait: without the wait for capacity the job would be stopped by neither
    _create_job(
        sagemaker_endpoint,
        demo_data,
        name,
        spot={"enabled": True, "max_wait_seconds": 30},
        stopping={"max_runtime_seconds": 30},
        hyperparameters={"epochs": 100, "epoch-sleep": 0.5},
    )
    sm, s3 = sagemaker_endpoint.client("sagemaker"), sagemaker_endpoint.client("s3")
    _wait_for(lambda: sm.describe_training_job(TrainingJobName=name)["SecondaryStatus"] == "Training", 40)
    desc = sm.describe_training_job(TrainingJobName=name)
    waited = (desc["TrainingStartTime"] - desc["CreationTime"]).total_seconds()
    assert waited >= 4, desc["SecondaryStatusTransitions"]
    _wait_for(lambda: sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "Stopped", 60)
    desc = sm.describe_training_job(TrainingJobName=name)
    assert desc["SecondaryStatus"] == "MaxWaitTimeExceeded"
    assert desc["FailureReason"] == f"MaxWaitTimeExceeded: {MAX_WAIT_MESSAGE} (MaxWaitTimeInSeconds=30)"
    statuses = [t["Status"] for t in desc["SecondaryStatusTransitions"]]
    assert statuses[-1] == "MaxWaitTimeExceeded" and "Training" in statuses
    assert desc["SecondaryStatusTransitions"][-1]["StatusMessage"] == MAX_WAIT_MESSAGE
    # stopped when the wait plus the training ran past 30 s, before MaxRuntime (30 s of training)
    stopped_after = (desc["TrainingEndTime"] - desc["CreationTime"]).total_seconds()
    assert 30 <= stopped_after < 30 + 10, stopped_after
    assert desc["TrainingTimeInSeconds"] < 30
    # what the job checkpointed before the stop is in S3 (the stop's final sync)
    keys = [
        o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"checkpoints/{name}/").get("Contents", [])
    ]
    assert any(k.endswith("_MANIFEST.json") for k in keys), keys


def test_the_documented_fault_calls_are_the_admin_api(sagemaker_endpoint: Any) -> None:
    """docs/emulator.md's ``curl`` lines, sent as written (to this endpoint): armed, or refused saying why."""
    doc = (REPO / "docs" / "emulator.md").read_text()
    calls = re.findall(r"curl -X POST http://127\.0\.0\.1:4566(/_emulator/faults) -d '(.*)'", doc)
    answers = {}
    for path, body in calls:
        req = urllib.request.Request(f"{sagemaker_endpoint.endpoint}{path}", data=body.encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                answers[json.loads(body)["fault"]] = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            answers[json.loads(body)["fault"]] = {"status": exc.code, **json.loads(exc.read())}
    assert answers == {
        "spot_interruption": {"status": 400, "error": "no running training job 'my-job-1a2b3c4d5e'"},
        "spot_capacity_wait": {"spot_capacity_wait_seconds": 30.0},
        "insufficient_capacity": {"capacity_failures": 1},
        "host_failure": {"host_failures": 1},
        "throttle": {"throttle_share": 0.3},
    }
    sagemaker_endpoint.reset()  # disarm what the doc's calls armed


def test_a_new_job_is_never_seen_completed_before_it_ran(sagemaker_endpoint: Any, tmp_path: Path) -> None:
    """moto makes a job record ``Completed`` when it is created; a poller that read it before the
    emulator's run took over would count a job that never ran as finished (a run once noticed its
    job's "end" 6 s early this way). Describes every 10 ms from before the create."""
    import threading

    from .conftest import script_job_spec

    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    name = "emu-first-status"
    spec_dict = script_job_spec(tmp_path, name, "import time\ntime.sleep(2)\n")
    sm = sagemaker_endpoint.client("sagemaker")
    seen: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            jobs = sm.list_training_jobs()["TrainingJobSummaries"]  # the run's job, whatever its name
            status = jobs[0]["TrainingJobStatus"] if jobs else None
            if status and (not seen or seen[-1] != status):
                seen.append(status)
            if status in ("Completed", "Failed", "Stopped"):
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run_task(operator(spec_dict), make_context("run-first-status"))
    finally:
        watcher.join(60)
        done.set()
    assert seen == ["InProgress", "Completed"], seen


def test_sagemaker_calls_are_counted_by_operation_until_reset(sagemaker_endpoint: Any) -> None:
    client = sagemaker_endpoint.client("sagemaker")
    client.list_training_jobs()
    client.list_training_jobs()
    with pytest.raises(client.exceptions.ClientError):
        client.describe_training_job(TrainingJobName="no-such-job")
    sagemaker_endpoint.client("s3").list_buckets()  # not SageMaker: not counted

    assert sagemaker_endpoint.state()["sagemaker_calls"] == {"ListTrainingJobs": 2, "DescribeTrainingJob": 1}
    sagemaker_endpoint.reset()
    assert sagemaker_endpoint.state()["sagemaker_calls"] == {}
