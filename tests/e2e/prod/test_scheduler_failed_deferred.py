"""Scenario 7: the scheduler fails a deferred training task (a missed heartbeat) that has retries left.

Under load the scheduler can judge a task to have lost its heartbeat just as the task defers
(issue 39: 8 of 40 tasks). Airflow then fails the task instance with ``handle_failure``, which puts it
``up_for_retry``, and the triggerer cancels its trigger. Here the
verdict is Airflow's own code (``TaskInstance.handle_failure``, what the scheduler calls for an
executor-reported failure), run against the stack's database while the task is deferred.

Asserted: the job keeps running (the trigger's ``on_kill`` reads ``up_for_retry``: the task will
come back), the next try resumes without a trigger event and reattaches to the same job, the task
succeeds, and exactly one job exists, none stopped.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod.scenarios import task_instance, training_jobs, wait_until
from tests.e2e.prod_stack import ProdStack

pytestmark = [pytest.mark.e2e, pytest.mark.prodstack, pytest.mark.xdist_group("airflow-prodstack")]

DAG_ID = "adt_prod_training"  # retries=1, retry_delay=0

HEARTBEAT_VERDICT = """
import sys
from sqlalchemy import select
from airflow.models.dagbag import DBDagBag
from airflow.models.taskinstance import TaskInstance
from airflow.utils.session import create_session

dag_id, run_id = sys.argv[1:3]
with create_session() as session:
    ti = session.scalars(
        select(TaskInstance).where(
            TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == "train"
        )
    ).one()
    assert ti.state == "deferred", ti.state
    ti.task = DBDagBag().get_dag_for_run(dag_run=ti.dag_run, session=session).get_task("train")
    ti.handle_failure(error="Detected a task instance without a heartbeat", session=session)
    print(ti.state, ti.next_method)
"""


def test_a_deferred_task_failed_by_the_scheduler_keeps_its_job_and_reattaches(
    prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any
) -> None:
    prod_api.wait_for_dag(DAG_ID)
    prod_api.unpause(DAG_ID)
    run_id = prod_api.trigger_run(DAG_ID, {"seconds": 45})

    def trigger_runs() -> bool:  # the triggerer runs the wait (so its cancellation calls on_kill)
        return task_instance(prod_api, DAG_ID, run_id)["state"] == "deferred" and (
            "Waiting for SageMaker training job" in prod_api.task_log(DAG_ID, run_id, "train")
        )

    wait_until("the task defers on its running job", trigger_runs, 300, prod_stack, poll=2)
    # this run's job, by the link its task pushed (another scenario's runs may still create jobs)
    response = prod_api.request(
        "GET",
        f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/train/xcomEntries/sagemaker_training_job",
        params={"deserialize": "true", "stringify": "false"},
    )
    name = str(response.json()["value"]["job_name"])

    def run_jobs() -> list[dict[str, Any]]:  # the run's jobs: its first and any relaunch (name-r2, ...)
        return [j for j in training_jobs(endpoint) if j["TrainingJobName"].startswith(name)]

    (job,) = run_jobs()
    verdict = subprocess.run(
        [sys.executable, "-c", HEARTBEAT_VERDICT, DAG_ID, run_id],
        env=prod_stack.environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verdict.returncode == 0, verdict.stderr[-3000:]
    assert verdict.stdout.splitlines()[-1].split()[0] == "up_for_retry", verdict.stdout

    prod_api.wait_for_run(DAG_ID, run_id, timeout=300)
    ti = task_instance(prod_api, DAG_ID, run_id)
    assert ti["state"] == "success" and ti["try_number"] == 2, prod_api.failure_report(DAG_ID, run_id)
    jobs = run_jobs()
    assert [(j["TrainingJobName"], j["TrainingJobStatus"]) for j in jobs] == [
        (job["TrainingJobName"], "Completed")
    ]
    desc = endpoint.client("sagemaker").describe_training_job(TrainingJobName=job["TrainingJobName"])
    assert "Stopping" not in [t["Status"] for t in desc.get("SecondaryStatusTransitions", [])]
    assert prod_api.xcom(DAG_ID, run_id, "train")["job_name"] == job["TrainingJobName"]
