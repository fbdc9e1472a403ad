"""CheckpointFreshnessTrigger against a moto server (the job's status, through the shared poller)
and a checkpoint root on disk: a stall is an event with the reason, the job is never touched."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.checkpointing import CheckpointWriter
from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.triggers.checkpoints import CheckpointFreshnessTrigger
from airflow_dist_training.triggers.polling import get_poller

MotoSageMaker = Any  # the fixture class lives in conftest.py

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


def make_trigger(name: str, root: Path, max_age: float) -> CheckpointFreshnessTrigger:
    trigger = CheckpointFreshnessTrigger(
        name, str(root), max_age, aws_conn_id=None, region_name="us-east-1", poll_interval=0.1
    )
    trigger._log = logging.getLogger(f"adt.test.freshness.{name}")
    return trigger


async def first_event(trigger: CheckpointFreshnessTrigger, timeout: float = 20) -> TriggerEvent:
    gen = trigger.run()
    try:
        return await asyncio.wait_for(gen.__anext__(), timeout=timeout)
    finally:
        await gen.aclose()
        await get_poller(trigger.aws_conn_id, trigger.region_name).aclose()


def checkpoint(root: Path, step: int) -> None:
    with CheckpointWriter(root, rank=0, fsync=False).checkpoint(step=step, epoch=step) as directory:
        (directory / "state.pt").write_bytes(b"w")


def training(moto_sm: MotoSageMaker, name: str) -> None:
    from moto.core.utils import utcnow

    moto_sm.backend.training_jobs[name].training_start_time = utcnow()  # first: one describe sees both
    moto_sm.set_state(name, "InProgress", "Training")


async def test_a_stall_is_an_event_with_the_reason_and_the_job_runs_on(
    moto_sm: MotoSageMaker, tmp_path: Path
) -> None:
    moto_sm.create_job("job-stall")
    training(moto_sm, "job-stall")
    checkpoint(tmp_path, 10)  # then nothing more
    event = await first_event(make_trigger("job-stall", tmp_path, 0.6))
    payload = event.payload
    assert (payload["status"], payload["job_name"], payload["job_status"]) == (
        "stalled",
        "job-stall",
        "InProgress",
    )
    message = payload["message"]
    assert message.startswith(
        "Checkpoint stall: training job job-stall has written no new complete checkpoint for "
    )
    assert "max_age_seconds=0.6" in message and f"step 10 ({tmp_path}" in message, message
    assert message.endswith("on_stall=alarm: the job is left running."), message
    assert payload["freshness"]["stale"] and payload["freshness"]["age_seconds"] > 0.6
    assert moto_sm.stop_requests == []  # the watch never stops the job
    assert moto_sm.sm.describe_training_job(TrainingJobName="job-stall")["TrainingJobStatus"] == "InProgress"


async def test_no_alarm_before_training_starts_nor_while_checkpoints_arrive(
    moto_sm: MotoSageMaker, tmp_path: Path
) -> None:
    """Provisioning longer than max_age is not a stall; nor is a job checkpointing every 0.2 s;
    the watch ends when the job does."""
    moto_sm.create_job("job-ok")  # InProgress, Starting
    moto_sm.backend.training_jobs["job-ok"].training_start_time = None  # as SageMaker: none yet

    async def job() -> None:
        await asyncio.sleep(1.0)  # > max_age before training starts
        training(moto_sm, "job-ok")
        for step in range(1, 8):
            checkpoint(tmp_path, step)
            await asyncio.sleep(0.2)
        moto_sm.set_state("job-ok", "Completed", "Completed")

    task = asyncio.create_task(job())
    event = await first_event(make_trigger("job-ok", tmp_path, 0.7))
    await task
    assert (event.payload["status"], event.payload["job_status"]) == ("ended", "Completed"), event.payload
    assert event.payload["message"] == "Training job job-ok is Completed: the watch ends."


@pytest.mark.parametrize("layout", ["hf-trainer", "dcp"])
async def test_a_newer_partial_checkpoint_does_not_keep_a_stalled_job_fresh(
    moto_sm: MotoSageMaker, tmp_path: Path, layout: str
) -> None:
    """A Hugging Face Trainer (or DCP) root on S3 whose newest complete checkpoint is older than
    max_age stalls, though a newer partial one has just arrived (a job killed in a save, or SageMaker
    uploading a checkpoint's files in no order: its state file first): only a complete checkpoint
    restarts the clock, so the alarm names the complete one."""
    import boto3

    from tests import checkpoint_layouts as w

    if layout == "hf-trainer":  # the state file is there, a shard is not
        complete, partial = w.write_hf(tmp_path, 500), w.write_hf(tmp_path, 1000, drop=("optimizer.pt",))
    else:
        complete, partial = w.write_dcp(tmp_path, 500), w.write_dcp(tmp_path, 1000, complete=False)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="ckpt-run")

    def upload(folder: Path) -> None:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = f"run/{folder.name}/{path.relative_to(folder)}"
                s3.put_object(Bucket="ckpt-run", Key=key, Body=path.read_bytes())

    moto_sm.create_job("job-partial")
    training(moto_sm, "job-partial")
    upload(complete)
    await asyncio.sleep(1.1)  # the complete checkpoint is now older than max_age
    upload(partial)  # just now: counted, it would keep the job fresh for another second
    trigger = CheckpointFreshnessTrigger(
        "job-partial", "s3://ckpt-run/run/", 1.0, aws_conn_id=None, region_name="us-east-1", poll_interval=0.1
    )
    trigger._log = logging.getLogger("adt.test.freshness.partial")
    payload = (await first_event(trigger)).payload
    assert (payload["status"], payload["job_status"]) == ("stalled", "InProgress"), payload
    assert f"step 500 (s3://ckpt-run/run/{complete.name}/" in payload["message"], payload["message"]
    assert payload["freshness"]["step"] == 500 and payload["freshness"]["age_seconds"] > 1.0
    assert moto_sm.stop_requests == []


async def test_round_trip() -> None:
    trigger = CheckpointFreshnessTrigger("j", "s3://b/c/", 60, on_stall="stop", step_pattern=None)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_dist_training.triggers.checkpoints.CheckpointFreshnessTrigger"
    assert kwargs == {
        "job_name": "j",
        "checkpoint_uri": "s3://b/c/",
        "max_age_seconds": 60,
        "on_stall": "stop",
        "checkpoint_layout": "auto",
        "step_pattern": None,
        "aws_conn_id": "aws_default",
        "region_name": None,
        "poll_interval": 30,
    }
    assert CheckpointFreshnessTrigger(**kwargs).serialize() == (classpath, kwargs)
