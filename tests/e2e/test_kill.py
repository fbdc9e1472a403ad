"""Killing a training task stops its SageMaker job: Airflow's own services, a worker and a triggerer.

The user marks a task failed (it waits on a worker: the supervisor ends it and ``on_kill`` runs)
or success (it waits in the triggerer: the triggerer cancels it and the trigger's ``on_kill``
runs). Either way StopTrainingJob reaches the moto server, exactly once, and the job is Stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from tests.e2e.airflow_services import AirflowApi, AirflowServices
from tests.integration.training.fake_sagemaker_training import FakeTrainingLifecycle

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("airflow-e2e")]

DAG_ID = "adt_e2e_kill"


@pytest.fixture
def fake(moto_server: str) -> Iterator[FakeTrainingLifecycle]:
    lifecycle = FakeTrainingLifecycle()
    lifecycle.install()
    lifecycle.reset()
    lifecycle.complete_after = None  # jobs run until stopped
    try:
        yield lifecycle
    finally:
        lifecycle.uninstall()


def test_marking_tasks_failed_or_success_stops_their_jobs(
    airflow_services: AirflowServices, airflow_api: AirflowApi, fake: FakeTrainingLifecycle
) -> None:
    airflow_api.wait_for_dag(DAG_ID)
    airflow_api.unpause(DAG_ID)  # DAGs are paused at creation (tests/e2e/airflow_services.py)
    run_id = airflow_api.trigger_run(DAG_ID)

    def wait_until(what: str, check: Callable[[], bool], timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                pytest.fail(
                    f"timed out waiting until {what}\n{airflow_api.failure_report(DAG_ID, run_id)}\n"
                    f"train_deferred:\n{airflow_api.task_log(DAG_ID, run_id, 'train_deferred')[-6000:]}\n"
                    f"triggerer:\n{airflow_services.log_tail('triggerer', 80)}"
                )
            time.sleep(1)

    def states() -> dict[str, str]:
        return {ti["task_id"]: ti["state"] for ti in airflow_api.task_instances(DAG_ID, run_id)}

    def job(prefix: str) -> str | None:
        return next((name for name in fake.create_log if name.startswith(prefix)), None)

    wait_until(
        "train_sync is running and train_deferred is deferred, each with its job",
        lambda: (
            states() == {"train_sync": "running", "train_deferred": "deferred"}
            and job("kill-sync-") is not None
            and job("kill-deferred-") is not None
        ),
    )
    # A trigger the triggerer has not started yet gets no on_kill from Airflow: that window is
    # what the stop_orphaned_jobs teardown covers. Here the trigger runs.
    wait_until(
        "the triggerer runs the trigger",
        lambda: (
            "Waiting for SageMaker training job" in airflow_api.task_log(DAG_ID, run_id, "train_deferred")
        ),
    )
    for task_id, state in (("train_sync", "failed"), ("train_deferred", "success")):
        response = airflow_api.request(
            "PATCH", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}", json={"new_state": state}
        )
        assert response.status_code == 200, response.text

    sync_job, deferred_job = job("kill-sync-"), job("kill-deferred-")
    wait_until(
        "both jobs got StopTrainingJob",
        lambda: fake.stops[sync_job] == 1 and fake.stops[deferred_job] == 1,
    )
    assert fake.job(sync_job).training_job_status == "Stopped"
    assert fake.job(deferred_job).training_job_status == "Stopped"
    assert fake.total_creates == 2  # nothing was relaunched
    assert states() == {"train_sync": "failed", "train_deferred": "success"}
    # the worker's on_kill read the state from its supervisor: a user's kill, not a retry's
    assert "Task killed: the task instance is failed" in airflow_api.task_log(DAG_ID, run_id, "train_sync")
