"""Scenarios 4 and 5 on the production-like stack.

5. **Kill from the UI/API.** A training task waiting in a triggerer and one waiting on a Celery worker
   are marked failed (``PATCH .../taskInstances/train`` ``{"new_state": "failed"}``, what the UI's
   "Mark as failed" sends): each one's job ends ``Stopped`` (the trigger's or the operator's
   ``on_kill`` sends StopTrainingJob). A third, waiting in a triggerer, is cleared
   (``POST .../clearTaskInstances``): the task comes back for its job, so the job keeps running and
   the next try reattaches to it; marked failed in turn, it is stopped. Nothing is left running.
4. **Scheduler and api-server restart** (SIGTERM, then started again) while a job runs. The run
   completes, and the Training view's data (``/dist-training/api/run``) loads with the scheduler
   down, after the api-server's restart, and after the run.
"""

from __future__ import annotations

import signal
from typing import Any

import httpx
import pytest

from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod.scenarios import task_instance, training_jobs, wait_until
from tests.e2e.prod_stack import ProdStack

pytestmark = [pytest.mark.e2e, pytest.mark.prodstack, pytest.mark.xdist_group("airflow-prodstack")]

DEFERRED, SYNC = "adt_prod_training", "adt_prod_training_sync"


def job_of(endpoint: Any, dag_id: str, run_id: str, api: AirflowApi) -> str | None:
    """The run's job name (the training task's link XCom), once the operator has it."""
    response = api.request(
        "GET",
        f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train/xcomEntries/sagemaker_training_job",
        params={"deserialize": "true", "stringify": "false"},
    )
    if response.status_code != 200:
        return None
    value = response.json().get("value")
    return value.get("job_name") if isinstance(value, dict) else None


def status(endpoint: Any, name: str) -> str:
    return str(endpoint.client("sagemaker").describe_training_job(TrainingJobName=name)["TrainingJobStatus"])


def test_marking_failed_stops_the_job_and_clearing_reattaches(
    prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any
) -> None:
    for dag_id in (DEFERRED, SYNC):
        prod_api.wait_for_dag(dag_id)
        prod_api.unpause(dag_id)
    runs = {
        "deferred-failed": (DEFERRED, prod_api.trigger_run(DEFERRED, {"seconds": 300})),
        "sync-failed": (SYNC, prod_api.trigger_run(SYNC, {"seconds": 300})),
        "deferred-cleared": (DEFERRED, prod_api.trigger_run(DEFERRED, {"seconds": 300})),
    }
    jobs: dict[str, str] = {}

    def all_waiting_with_a_running_job() -> bool:
        for key, (dag_id, run_id) in runs.items():
            expected = "running" if dag_id == SYNC else "deferred"
            name = job_of(endpoint, dag_id, run_id, prod_api)
            if task_instance(prod_api, dag_id, run_id)["state"] != expected or name is None:
                return False
            if "adt-step" not in prod_api.task_log(dag_id, run_id, "train"):
                return False  # the job runs and its lines reach the task (from the trigger or the worker)
            jobs[key] = name
        return True

    wait_until(
        "three tasks wait on their running jobs", all_waiting_with_a_running_job, 300, prod_stack, poll=2
    )
    for key in ("deferred-failed", "sync-failed"):
        dag_id, run_id = runs[key]
        response = prod_api.request(
            "PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/train", json={"new_state": "failed"}
        )
        assert response.status_code == 200, response.text
    cleared = runs["deferred-cleared"][1]
    response = prod_api.request(
        "POST",
        f"/dags/{DEFERRED}/clearTaskInstances",
        json={"dry_run": False, "dag_run_id": cleared, "task_ids": ["train"], "only_failed": False},
    )
    assert response.status_code == 200, response.text

    wait_until(
        "the two jobs marked failed are Stopped",
        lambda: all(status(endpoint, jobs[key]) == "Stopped" for key in ("deferred-failed", "sync-failed")),
        180,
        prod_stack,
        poll=2,
    )
    for key in ("deferred-failed", "sync-failed"):
        dag_id, run_id = runs[key]
        assert task_instance(prod_api, dag_id, run_id)["state"] == "failed"
    # the cleared task comes back for its job: try 2 waits on the same one, which still trains
    wait_until(
        "the cleared task's next try waits on the same job",
        lambda: (
            task_instance(prod_api, DEFERRED, cleared)["state"] == "deferred"
            and task_instance(prod_api, DEFERRED, cleared)["try_number"] == 2
        ),
        240,
        prod_stack,
        poll=2,
    )
    assert status(endpoint, jobs["deferred-cleared"]) == "InProgress"
    assert len(training_jobs(endpoint)) == 3
    response = prod_api.request(
        "PATCH", f"/dags/{DEFERRED}/dagRuns/{cleared}/taskInstances/train", json={"new_state": "failed"}
    )
    assert response.status_code == 200, response.text
    wait_until(
        "no job is left running",
        lambda: {j["TrainingJobStatus"] for j in training_jobs(endpoint)} == {"Stopped"},
        180,
        prod_stack,
        poll=2,
    )
    assert sorted(j["TrainingJobName"] for j in training_jobs(endpoint)) == sorted(jobs.values())


def test_scheduler_and_api_server_restart_mid_run(
    prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any
) -> None:
    prod_api.wait_for_dag(DEFERRED)
    prod_api.unpause(DEFERRED)
    run_id = prod_api.trigger_run(DEFERRED, {"seconds": 60})

    def view() -> dict[str, Any]:
        response = httpx.get(
            f"{prod_stack.base_url}/dist-training/api/run",
            params={"dag_id": DEFERRED, "run_id": run_id},
            headers={"Authorization": f"Bearer {prod_api.token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    wait_until(
        "the job trains while the task is deferred",
        lambda: (
            task_instance(prod_api, DEFERRED, run_id)["state"] == "deferred"
            and [j["status"] for j in view()["jobs"]] == ["InProgress"]
        ),
        300,
        prod_stack,
        poll=2,
    )
    prod_stack.kill_service("scheduler", signal.SIGTERM)
    assert [j["status"] for j in view()["jobs"]] == ["InProgress"]  # no scheduler: the view still loads
    prod_stack.kill_service("api-server", signal.SIGTERM)
    prod_stack.start_service("api-server")
    wait_until("the api-server answers again", lambda: prod_stack.health() is not None, 180, prod_stack)
    assert view()["jobs"][0]["job_name"]  # the same token: the JWT secret is the deployment's
    prod_stack.start_service("scheduler")

    prod_api.wait_for_run(DEFERRED, run_id, timeout=300)
    (job,) = view()["jobs"]
    assert job["status"] == "Completed"
    assert [j["TrainingJobStatus"] for j in training_jobs(endpoint)] == ["Completed"]
