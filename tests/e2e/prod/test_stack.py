"""The production-like stack itself: PostgreSQL, Celery on Redis, two workers and two triggerers, healthy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod_stack import HOSTNAMES, ProdStack

pytestmark = [pytest.mark.e2e, pytest.mark.prodstack, pytest.mark.xdist_group("airflow-prodstack")]


def test_stack_runs_on_postgres_with_celery_and_two_triggerers(
    prod_stack: ProdStack, prod_api: AirflowApi
) -> None:
    health = prod_stack.health()
    assert health is not None
    assert all(
        health[part]["status"] == "healthy"
        for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
    )
    config = prod_stack.environment()
    assert config["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert config["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    jobs = prod_api.get("/jobs", params={"job_type": "TriggererJob", "job_state": "running"})["jobs"]
    assert {job["hostname"] for job in jobs} >= {HOSTNAMES["triggerer-1"], HOSTNAMES["triggerer-2"]}


def test_a_training_task_runs_on_a_celery_worker_and_waits_in_a_triggerer(
    prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any
) -> None:
    prod_api.wait_for_dag("adt_prod_training")
    prod_api.unpause("adt_prod_training")
    run_id = prod_api.trigger_run("adt_prod_training", {"seconds": 5})
    prod_api.wait_for_run("adt_prod_training", run_id, timeout=300)
    (ti,) = prod_api.task_instances("adt_prod_training", run_id)
    assert ti["hostname"] in (HOSTNAMES["worker-1"], HOSTNAMES["worker-2"])
    log = prod_api.task_log("adt_prod_training", run_id, "train")
    assert "adt-step 5/5" in log
    jobs = endpoint.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    assert [job["TrainingJobStatus"] for job in jobs] == ["Completed"]
