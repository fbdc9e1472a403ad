"""The shared poller: 200 triggers in one loop against moto, call economy and detection latency."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from airflow_dist_training.triggers.polling import get_poller
from airflow_dist_training.triggers.training import TrainingJobTrigger

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

MotoSageMaker = Any  # fixture class in conftest.py


def trigger(name: str, poll: float) -> TrainingJobTrigger:
    t = TrainingJobTrigger(
        name, aws_conn_id=None, region_name="us-east-1", poll_interval=poll, stream_logs=False
    )
    t._log = logging.getLogger("adt.test.poller")
    return t


async def watch_until_event(t: TrainingJobTrigger, done: dict[str, float], events: dict[str, Any]) -> None:
    gen = t.run()
    try:
        event = await gen.__anext__()
        done[t.job_name] = time.monotonic()
        events[t.job_name] = event.payload
    finally:
        await gen.aclose()


@pytest.mark.slow
async def test_200_triggers_share_one_poller(moto_sm: MotoSageMaker) -> None:
    n, poll = 200, 1.0
    names = [f"fleet-{i:03d}" for i in range(n)]
    for name in names:
        moto_sm.create_job(name)
        moto_sm.set_state(name, "InProgress", "Training")
    done: dict[str, float] = {}
    events: dict[str, Any] = {}
    tasks = [asyncio.create_task(watch_until_event(trigger(nm, poll), done, events)) for nm in names]

    # Warm-up: a burst of 200 new status-only watchers takes its baseline from the
    # InProgress/Stopping listing (a few pages), not from 200 describes.
    poller = get_poller(None, "us-east-1")
    deadline = time.monotonic() + 30
    while (len(poller.watched_jobs) < n or any(poller._jobs[nm].key is None for nm in names)) and (
        time.monotonic() < deadline
    ):
        await asyncio.sleep(0.05)
    await asyncio.sleep(poll)
    assert sorted(poller.watched_jobs) == names
    assert moto_sm.calls["DescribeTrainingJob"] == 0
    assert moto_sm.calls["ListTrainingJobs"] <= 10
    moto_sm.calls.clear()

    # Steady state over 5 intervals: a handful of list pages, no describes.
    await asyncio.sleep(poll * 5)
    steady = dict(moto_sm.calls)
    assert steady.get("DescribeTrainingJob", 0) == 0
    per_interval = sum(steady.values()) / 5
    assert per_interval <= n / 20, steady  # >= 20x fewer than 200 describes per interval

    # A completion is seen within one poll interval (+ processing slack on a shared 2-core box).
    completed = time.monotonic()
    moto_sm.set_state("fleet-007", "Completed", "Completed")
    moto_sm.set_state("fleet-123", "Failed", "Failed", "AlgorithmError: NaN loss")
    while not {"fleet-007", "fleet-123"} <= set(done) and time.monotonic() - completed < 10:
        await asyncio.sleep(0.02)  # both: their describes may land in either order
    assert done["fleet-007"] - completed <= poll + 1.0  # slack for a loaded box; bench/ measures latency
    assert done["fleet-123"] - completed <= poll + 1.0
    assert events["fleet-007"]["status"] == "success"
    assert events["fleet-123"] == {
        "status": "failed",
        "job_name": "fleet-123",
        "job_status": "Failed",
        "failure_reason": "AlgorithmError: NaN loss",
        "message": "Training job fleet-123 Failed: AlgorithmError: NaN loss",
    }
    # Only the two changed jobs were described.
    assert moto_sm.calls["DescribeTrainingJob"] == 2

    # A secondary-status change of a status-only watcher is published from the list summary.
    moto_sm.set_state("fleet-050", "InProgress", "Uploading")
    await asyncio.sleep(poll * 1.5)
    assert moto_sm.calls["DescribeTrainingJob"] == 2
    assert len(poller.watched_jobs) == n - 2

    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)
    assert poller.watched_jobs == []
    await poller.aclose()


async def _wait_until(condition: Any, timeout: float = 20.0) -> None:
    """Poll ``condition`` until true; fail (never hang) after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_list_denied_falls_back_to_describes(
    moto_sm: MotoSageMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.responses import SageMakerResponse

    def denied(self: Any) -> None:
        raise JsonRESTError("AccessDeniedException", "not authorized to perform: sagemaker:ListTrainingJobs")

    monkeypatch.setattr(SageMakerResponse, "list_training_jobs", denied)
    moto_sm.create_job("job-noperm")
    moto_sm.set_state("job-noperm", "InProgress", "Training")
    t = trigger("job-noperm", 0.1)
    task = asyncio.create_task(t.run().__anext__())
    await _wait_until(lambda: moto_sm.calls["DescribeTrainingJob"] >= 2)
    moto_sm.set_state("job-noperm", "Completed", "Completed")
    event = await asyncio.wait_for(task, 10)
    assert event.payload["status"] == "success"
    assert moto_sm.calls["ListTrainingJobs"] <= 1  # tried (at most) once, then describes only
    assert moto_sm.calls["DescribeTrainingJob"] >= 3
    await get_poller(None, "us-east-1").aclose()


async def test_reconcile_catches_a_change_without_last_modified_time(moto_sm: MotoSageMaker) -> None:
    moto_sm.create_job("job-stale")
    moto_sm.set_state("job-stale", "InProgress", "Training")
    get_poller(None, "us-east-1").reconcile_every = 3
    t = trigger("job-stale", 0.1)
    task = asyncio.create_task(t.run().__anext__())
    await _wait_until(lambda: moto_sm.calls["ListTrainingJobs"] >= 1)
    job = moto_sm.backend.training_jobs["job-stale"]
    job.training_job_status = "Completed"  # LastModifiedTime deliberately not updated
    job.secondary_status = "Completed"
    event = await asyncio.wait_for(task, 10)
    assert event.payload["status"] == "success"
    await get_poller(None, "us-east-1").aclose()
