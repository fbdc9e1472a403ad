"""TrainingJobTrigger against a moto server: terminal states, logs, throttling, on_kill."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.triggers.polling import get_poller
from airflow_dist_training.triggers.training import TrainingJobTrigger

MotoSageMaker = Any  # the fixture class lives in conftest.py

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

POLL = 0.1


def make_trigger(name: str, **kw: Any) -> TrainingJobTrigger:
    kw.setdefault("poll_interval", POLL)
    trigger = TrainingJobTrigger(name, aws_conn_id=None, region_name="us-east-1", **kw)
    trigger._log = logging.getLogger(f"adt.test.trigger.{name}")  # stdlib logger -> caplog
    return trigger


async def first_event(trigger: TrainingJobTrigger, timeout: float = 20) -> TriggerEvent:
    gen = trigger.run()
    try:
        return await asyncio.wait_for(gen.__anext__(), timeout=timeout)
    finally:
        await gen.aclose()
        await get_poller(trigger.aws_conn_id, trigger.region_name).aclose()


async def first_describe(moto_sm: MotoSageMaker) -> None:
    """Wait for the trigger's first DescribeTrainingJob (client start-up can take a second)."""

    async def poll() -> None:
        while moto_sm.calls["DescribeTrainingJob"] < 1:
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout=30)


async def later(moto_sm: MotoSageMaker, delay: float, fn: Any, *args: Any) -> None:
    await first_describe(moto_sm)
    await asyncio.sleep(delay)
    fn(*args)


async def test_success_after_secondary_transitions(
    moto_sm: MotoSageMaker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adt.test")
    moto_sm.create_job("job-ok")

    async def script() -> None:
        await first_describe(moto_sm)
        for secondary in ("Downloading", "Training", "Uploading"):
            await asyncio.sleep(0.3)
            moto_sm.set_state("job-ok", "InProgress", secondary)
        await asyncio.sleep(0.3)
        moto_sm.set_state("job-ok", "Completed", "Completed")

    task = asyncio.create_task(script())
    event = await first_event(make_trigger("job-ok"))
    await task
    assert event == TriggerEvent(
        {
            "status": "success",
            "job_name": "job-ok",
            "job_status": "Completed",
            "failure_reason": None,
            "message": "Training job job-ok completed.",
            "last_lines": [],  # the job wrote no log lines
        }
    )
    timeline = [r.getMessage() for r in caplog.records if "(started " in r.getMessage()]
    phases = [m.split(": ", 1)[1].split(" (")[0] for m in timeline]
    assert phases == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    assert all("(started 20" in m for m in timeline)  # ISO timestamps from SecondaryStatusTransitions


@pytest.mark.parametrize(
    ("status", "secondary", "reason", "expected"),
    [
        ("Failed", "Failed", "AlgorithmError: CUDA out of memory", "failed"),
        ("Stopped", "MaxRuntimeExceeded", "MaxRuntimeInSeconds of 86400 exceeded", "failed"),
        ("Stopped", "Stopped", None, "stopped"),
    ],
)
async def test_failed_and_stopped(
    moto_sm: MotoSageMaker, status: str, secondary: str, reason: str | None, expected: str
) -> None:
    moto_sm.create_job("job-x")
    moto_sm.set_state("job-x", "InProgress", "Training")
    task = asyncio.create_task(later(moto_sm, 0.3, moto_sm.set_state, "job-x", status, secondary, reason))
    event = await first_event(make_trigger("job-x", stream_logs=False))
    await task
    assert event.payload["status"] == expected
    assert event.payload["job_status"] == status
    assert event.payload["job_name"] == "job-x"
    if reason:
        assert event.payload["failure_reason"] == reason
        assert reason in event.payload["message"]
    else:
        assert event.payload["failure_reason"] is None
        assert event.payload["message"] == "Training job job-x was stopped."


async def test_no_silent_cap_only_user_max_wait(moto_sm: MotoSageMaker) -> None:
    moto_sm.create_job("job-slow")
    moto_sm.set_state("job-slow", "InProgress", "Training")
    # With no max_wait the trigger is still waiting after many intervals...
    trigger = make_trigger("job-slow", stream_logs=False)
    waiting = asyncio.create_task(trigger.run().__anext__())
    await asyncio.sleep(2.0)  # 20 poll intervals
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # ...and a user-set max wait ends with a timeout event (the job is not stopped).
    event = await first_event(make_trigger("job-slow", stream_logs=False, max_wait_seconds=0.5))
    assert event.payload["status"] == "timeout"
    assert event.payload["job_status"] == "InProgress"
    assert "max_wait_seconds=0.5" in event.payload["message"]
    assert moto_sm.stop_requests == []


async def test_unknown_job_is_an_error_event(moto_sm: MotoSageMaker) -> None:
    event = await first_event(make_trigger("does-not-exist", stream_logs=False))
    assert event.payload["status"] == "error"
    assert event.payload["job_name"] == "does-not-exist"
    assert "does-not-exist" in event.payload["message"]


@pytest.mark.parametrize("hosts", [2, 60])
async def test_logs_from_all_hosts_in_timestamp_order(
    moto_sm: MotoSageMaker, caplog: pytest.LogCaptureFixture, hosts: int
) -> None:
    caplog.set_level(logging.INFO, logger="adt.test")
    name = f"job-logs-{hosts}"
    moto_sm.create_job(name, instance_count=hosts)
    written = moto_sm.seed_logs(name, hosts=hosts, lines_per_host=5)
    moto_sm.set_state(name, "InProgress", "Training")
    task = asyncio.create_task(later(moto_sm, 0.5, moto_sm.set_state, name, "Completed", "Completed"))
    event = await first_event(make_trigger(name), timeout=60)
    await task
    assert event.payload["status"] == "success"
    streamed = [
        r.getMessage().split(" ", 2)[2] for r in caplog.records if r.getMessage().startswith("[algo-")
    ]
    assert streamed == [msg for _, msg in written]  # every line, once, in timestamp order
    assert len(streamed) == hosts * 5
    # the terminal event hands the task the last lines streamed (a triggerer may drop its own copy)
    last = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[algo-")][-5:]
    assert event.payload["last_lines"] == last
    # >50 hosts needs more than one DescribeLogStreams page
    if hosts > 50:
        assert moto_sm.calls["DescribeLogStreams"] >= 2


async def test_logs_only_fetched_in_streaming_states(moto_sm: MotoSageMaker) -> None:
    moto_sm.create_job("job-quiet")  # InProgress / Starting: no containers yet
    moto_sm.seed_logs("job-quiet", hosts=1, lines_per_host=1)
    trigger = make_trigger("job-quiet", max_wait_seconds=0.6)
    event = await first_event(trigger)
    assert event.payload["status"] == "timeout"
    assert moto_sm.calls["GetLogEvents"] == 0
    assert moto_sm.calls["DescribeLogStreams"] == 0


async def test_throttling_on_half_the_calls_still_succeeds(moto_sm: MotoSageMaker) -> None:
    moto_sm.create_job("job-throttled")
    moto_sm.throttle("DescribeTrainingJob")
    moto_sm.throttle("ListTrainingJobs")
    moto_sm.set_state("job-throttled", "InProgress", "Training")
    task = asyncio.create_task(
        later(moto_sm, 0.5, moto_sm.set_state, "job-throttled", "Completed", "Completed")
    )
    event = await first_event(make_trigger("job-throttled", stream_logs=False), timeout=30)
    await task
    assert event.payload["status"] == "success"
    assert moto_sm.throttled["DescribeTrainingJob"] >= 1
    assert moto_sm.throttled["ListTrainingJobs"] >= 1


async def test_on_kill_stops_the_job(moto_sm: MotoSageMaker) -> None:
    moto_sm.create_job("job-kill")
    moto_sm.set_state("job-kill", "InProgress", "Training")
    trigger = make_trigger("job-kill", stream_logs=False)
    task = asyncio.create_task(trigger.run().__anext__())
    await first_describe(moto_sm)
    assert not task.done(), task.result()
    task.cancel()  # what the triggerer does on a user kill, before calling on_kill()
    with pytest.raises(asyncio.CancelledError):
        await task
    await trigger.on_kill()
    assert moto_sm.stop_requests == ["job-kill"]
    assert moto_sm.backend.training_jobs["job-kill"].training_job_status == "Stopping"


@pytest.mark.parametrize(
    ("state", "stopped"),
    [
        ("failed", True),  # marked failed, or the last try ended: the task will not come back
        ("success", True),
        ("up_for_retry", False),  # failed by the scheduler (missed heartbeat) with retries left
        ("deferred", False),  # the trigger moved to another triggerer
        (None, False),  # cleared: the next try reattaches
        ("scheduled", False),  # the next try is already on its way
    ],
)
async def test_on_kill_stops_the_job_only_when_the_task_will_not_come_back(
    moto_sm: MotoSageMaker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    state: str | None,
    stopped: bool,
) -> None:
    """Airflow 3.3 calls ``on_kill`` for every cancellation but a triggerer shutdown; the task
    instance's state (read through the Task SDK, as the triggerer serves it) tells the cases apart."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import TaskStatesResult

    asked: list[Any] = []

    class TriggererComms:  # the triggerer's side of GetTaskStates
        async def asend(self, msg: Any) -> TaskStatesResult:
            asked.append(msg)
            return TaskStatesResult(task_states={"run-1": {"train_3": state}})

    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", TriggererComms(), raising=False)
    name = f"job-case-{state}"
    moto_sm.create_job(name)
    moto_sm.set_state(name, "InProgress", "Training")
    trigger = make_trigger(name, stream_logs=False)
    trigger.task_instance = SimpleNamespace(dag_id="d", run_id="run-1", task_id="train", map_index=3)
    with caplog.at_level(logging.INFO):
        await trigger.on_kill()
    assert [(m.dag_id, m.task_ids, m.run_ids, m.map_index) for m in asked] == [("d", ["train"], ["run-1"], 3)]
    assert moto_sm.stop_requests == ([name] if stopped else [])
    verdict = "stopping" if stopped else "is left running"
    assert any(verdict in r.getMessage() and name in r.getMessage() for r in caplog.records), caplog.text


async def test_on_kill_leaves_the_job_running_when_the_state_cannot_be_read(
    moto_sm: MotoSageMaker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner

    class SlowComms:  # an api-server too loaded to answer within the read's bound
        async def asend(self, msg: Any) -> Any:
            await asyncio.sleep(3600)

    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", SlowComms(), raising=False)
    monkeypatch.setattr("airflow_dist_training.triggers.base._STATE_READ_SECONDS", 0.3)
    monkeypatch.setattr("airflow_dist_training.triggers.base._STATE_READ_ATTEMPT_SECONDS", 0.1)
    moto_sm.create_job("job-unknown")
    moto_sm.set_state("job-unknown", "InProgress", "Training")
    trigger = make_trigger("job-unknown", stream_logs=False)
    trigger.task_instance = SimpleNamespace(dag_id="d", run_id="r", task_id="train", map_index=-1)
    await trigger.on_kill()
    assert moto_sm.stop_requests == []
    assert "could not be read (TimeoutError())" in caplog.text


async def test_on_kill_stops_the_job_once_a_slow_triggerer_answers_after_airflows_bound(
    moto_sm: MotoSageMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user marked the task failed, but the triggerer answers the state read only after the
    first reads timed out and after Airflow gave up on ``on_kill``: the job is still stopped."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner
    from airflow.sdk.execution_time.comms import TaskStatesResult

    reads: list[float] = []

    class LoadedComms:
        async def asend(self, msg: Any) -> TaskStatesResult:
            reads.append(asyncio.get_running_loop().time())
            if len(reads) < 3:
                await asyncio.sleep(3600)  # the first two reads hang
            return TaskStatesResult(task_states={"r": {"train": "failed"}})

    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", LoadedComms(), raising=False)
    monkeypatch.setattr("airflow_dist_training.triggers.base._STATE_READ_ATTEMPT_SECONDS", 0.1)
    monkeypatch.setattr("airflow_dist_training.triggers.base._STATE_READ_PAUSE_SECONDS", 0.01)
    moto_sm.create_job("job-slow-read")
    moto_sm.set_state("job-slow-read", "InProgress", "Training")
    trigger = make_trigger("job-slow-read", stream_logs=False)
    trigger.task_instance = SimpleNamespace(dag_id="d", run_id="r", task_id="train", map_index=-1)
    with pytest.raises(TimeoutError):  # Airflow's on_kill bound (30 s there) runs out first
        await asyncio.wait_for(trigger.on_kill(), 0.15)
    for _ in range(600):  # the decision goes on in the triggerer's loop
        if moto_sm.stop_requests:
            break
        await asyncio.sleep(0.05)
    assert len(reads) == 3 and moto_sm.stop_requests == ["job-slow-read"]


async def test_on_kill_cancelled_again_still_stops_the_job(moto_sm: MotoSageMaker) -> None:
    """The triggerer may cancel the trigger again while on_kill runs: the stop must still go out."""
    moto_sm.create_job("job-kill-twice")
    moto_sm.set_state("job-kill-twice", "InProgress", "Training")
    trigger = make_trigger("job-kill-twice", stream_logs=False)
    on_kill = asyncio.create_task(trigger.on_kill())
    await asyncio.sleep(0)  # on_kill has started its stop
    on_kill.cancel()
    with pytest.raises(asyncio.CancelledError):
        await on_kill
    for _ in range(600):  # the stop runs on in the triggerer's loop
        if moto_sm.stop_requests:
            break
        await asyncio.sleep(0.05)
    assert moto_sm.stop_requests == ["job-kill-twice"]


async def test_cleanup_does_not_stop_the_job(moto_sm: MotoSageMaker) -> None:
    moto_sm.create_job("job-restart")
    await make_trigger("job-restart").cleanup()
    assert moto_sm.stop_requests == []


async def test_on_kill_of_finished_job_is_harmless(moto_sm: MotoSageMaker) -> None:
    await make_trigger("gone").on_kill()  # not InProgress -> nothing to stop, nothing raised
    assert moto_sm.stop_requests == []  # described first: a finished job gets no StopTrainingJob
