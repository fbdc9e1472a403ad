"""TrainingJobSensor for jobs started elsewhere: same terminal-state rules as the operator."""

from __future__ import annotations

from typing import Any

import pytest
from fake_sagemaker_training import FakeTrainingLifecycle, make_context, make_request

from airflow_dist_training.errors import CapacityError, TrainingJobError
from airflow_dist_training.sensors.training import TrainingJobSensor

pytestmark = pytest.mark.integration


def sensor(name: str, **kwargs: Any) -> TrainingJobSensor:
    return TrainingJobSensor(
        task_id="watch", job_name=name, aws_conn_id=None, region_name="us-east-1", **kwargs
    )


def test_poke_waits_while_in_progress_then_returns_result(hook: Any, fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    hook.jobs.create(make_request("ext-job"))
    s = sensor("ext-job")
    assert s.poke(make_context()) is False
    fake.set_status("ext-job", "Completed")
    done = s.poke(make_context())
    assert done.is_done and done.xcom_value["job_name"] == "ext-job"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("status", "reason", "error"),
    [("Stopped", None, TrainingJobError), ("Failed", "InsufficientCapacityError: none", CapacityError)],
)
def test_poke_raises_on_unsuccessful_end(
    hook: Any, fake: FakeTrainingLifecycle, status: str, reason: str | None, error: type
) -> None:
    fake.complete_after = None
    hook.jobs.create(make_request("ext-bad"))
    fake.set_status("ext-bad", status, failure_reason=reason)
    with pytest.raises(error):
        sensor("ext-bad").poke(make_context())


def test_deferrable_sensor_defers_to_training_trigger(hook: Any, fake: FakeTrainingLifecycle) -> None:
    from airflow_dist_training.compat import TaskDeferred

    fake.complete_after = None
    hook.jobs.create(make_request("ext-def"))
    ctx = make_context()
    with pytest.raises(TaskDeferred) as info:
        sensor("ext-def", deferrable=True, poke_interval=5).execute(ctx)
    trigger = info.value.trigger
    assert type(trigger).__name__ == "TrainingJobTrigger"
    assert trigger.serialize()[1]["job_name"] == "ext-def"
    assert trigger.serialize()[1]["max_wait_seconds"] is None  # no silent cap
    assert ctx["ti"].xcom["sagemaker_training_job"]["job_name"] == "ext-def"
