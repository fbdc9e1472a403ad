"""Scenario 3: a Celery worker is lost (SIGKILL, with its pool, supervisor and task) at each crash
point of the training operator; the retry runs on the other worker and reattaches: 0 duplicates.

``worker-1`` is started with ``ADT_CRASH_AT=<point>`` while ``worker-2`` is stopped, so the first
try lands on it. At the point the task SIGKILLs the worker's whole process group
(``ADT_CRASH_KILL_PGID``, see ``hooks/training._fault_point``): nothing reports the loss. Then
``worker-2`` starts; the scheduler fails the try when its heartbeat is older than
``[scheduler] task_instance_heartbeat_timeout`` (20 s in this stack; Airflow's default is 300 s) and
the retry (``retries=1``) runs on ``worker-2``. The task runs synchronously (``deferrable=False``)
so that all four points are on the worker: ``before_create`` (nothing created yet: the retry
creates the run's one job), ``after_create`` (created, name not persisted: the retry finds the job
by its deterministic name and reattaches), ``after_persist`` and ``wait`` (waiting on the job; the
name is in ``task_state_store``: Airflow's ``ResumableJobMixin`` reconnects to it).
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod.scenarios import task_instance, training_jobs, wait_until
from tests.e2e.prod_stack import HOSTNAMES, ProdStack

pytestmark = [pytest.mark.e2e, pytest.mark.prodstack, pytest.mark.xdist_group("airflow-prodstack")]

DAG_ID = "adt_prod_training_sync"


@pytest.mark.parametrize("point", ["before_create", "after_create", "after_persist", "wait"])
def test_a_worker_lost_at_a_crash_point_is_retried_on_the_other_without_a_duplicate(
    point: str, prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any
) -> None:
    prod_api.wait_for_dag(DAG_ID)
    prod_api.unpause(DAG_ID)
    for worker in ("worker-2", "worker-1"):  # warm shutdown: no task is running
        prod_stack.kill_service(worker, signal.SIGTERM)
    prod_stack.start_service("worker-1", extra_env={"ADT_CRASH_AT": point})
    prod_stack.wait_workers(["worker-1"])
    try:
        run_id = prod_api.trigger_run(DAG_ID, {"seconds": 15})
        wait_until(
            f"worker-1 dies at {point}",
            lambda: prod_stack.processes["worker-1"].poll() is not None,
            240,
            prod_stack,
        )
        lost = time.monotonic()
    finally:
        prod_stack.start_service("worker-2")
    prod_stack.own_groups.pop("worker-1", None)  # the group died with it
    prod_stack.wait_workers(["worker-2"])
    prod_api.wait_for_run(DAG_ID, run_id, timeout=300)
    recovered = time.monotonic() - lost
    prod_stack.start_service("worker-1")  # back to two healthy workers
    prod_stack.wait_workers(["worker-1"])

    ti = task_instance(prod_api, DAG_ID, run_id)
    assert ti["try_number"] == 2, ti
    assert ti["hostname"] == HOSTNAMES["worker-2"]
    first = prod_api.get(f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/train/tries/1")
    assert first["hostname"] == HOSTNAMES["worker-1"]
    assert first["state"] in ("failed", "up_for_retry"), first

    jobs = training_jobs(endpoint)
    assert len(jobs) == 1, [j["TrainingJobName"] for j in jobs]  # 0 duplicates
    assert jobs[0]["TrainingJobStatus"] == "Completed"
    retry_log = prod_api.task_log(DAG_ID, run_id, "train", try_number=2)
    name = jobs[0]["TrainingJobName"]
    if point == "before_create":  # nothing was created: the retry creates the run's one job
        assert f"Created training job {name}" in retry_log
    elif point == "after_create":  # created, name not persisted: found by its deterministic name
        assert f"Found this run's training job {name}" in retry_log
        assert "reattaching, not creating" in retry_log
    else:  # the name was persisted in task_state_store: Airflow's ResumableJobMixin reconnects
        assert (
            "Reconnecting to existing job" in retry_log or "Job already completed successfully" in retry_log
        )
        assert name in retry_log
    if point != "before_create":
        assert "Creating training job" not in retry_log
    print(f"\n{point}: run succeeded {recovered:.0f} s after worker-1 was lost")
