"""Helpers shared by the production-like stack's scenarios: waiting, the runs' task instances, jobs."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from airflow_dist_training.operators.training import JOB_LAST_LINE
from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod_stack import ProdStack


def heavy_scenario_marks() -> list[Any]:
    """The marks of a heavy scenario: on the stack's worker, long. It runs in the default suite (and
    so in CI) at the reduced scale ``heavy_scale`` gives; ``scripts/test-prod-stack.sh`` runs it at
    full scale."""
    return [
        pytest.mark.e2e,
        pytest.mark.prodstack,
        pytest.mark.xdist_group("airflow-prodstack"),
        pytest.mark.timeout(2400),
    ]


def heavy_scale(full: int, reduced: int) -> int:
    """``full`` under ``ADT_PRODSTACK_HEAVY=1`` (``scripts/test-prod-stack.sh``), else ``reduced``:
    CI's 45-minute budget on 2 cores holds the heavy scenarios only at reduced scale."""
    import os

    return full if os.environ.get("ADT_PRODSTACK_HEAVY") == "1" else reduced


STEP = re.compile(r"adt-step (\d+)/(\d+) job=(\S+)")


def wait_until(
    what: str, check: Callable[[], bool], timeout: float, stack: ProdStack, poll: float = 1.0
) -> float:
    """Poll ``check`` until true; returns the time it took (monotonic seconds). Fails with service logs.
    A status read that times out is a "not yet" (the 40-job round's api-server answered one late)."""
    import httpx

    def checked() -> bool:
        try:
            return check()
        except httpx.TimeoutException:  # a loaded api-server answers late: ask again, within the timeout
            return False

    start = time.monotonic()
    while not checked():
        if time.monotonic() - start > timeout:
            pytest.fail(f"timed out after {timeout:.0f} s waiting until {what}\n{stack.all_log_tails(40)}")
        time.sleep(poll)
    return time.monotonic() - start


def task_instance(api: AirflowApi, dag_id: str, run_id: str, task_id: str = "train") -> dict[str, Any]:
    """The task instance as REST returns it; ``{"state": None}`` until the scheduler has created it."""
    response = api.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
    if response.status_code == 404:
        return {"state": None}
    if response.status_code != 200:
        raise AssertionError(
            f"GET task instance {dag_id}/{run_id}/{task_id}: {response.status_code} {response.text}"
        )
    return dict(response.json())


def triggerer_hostnames(api: AirflowApi) -> dict[int, str]:
    """Triggerer job id -> its hostname (every triggerer job, alive or not)."""
    jobs = api.get("/jobs", params={"job_type": "TriggererJob", "limit": 100})["jobs"]
    return {int(job["id"]): str(job["hostname"]) for job in jobs}


def training_jobs(endpoint: Any) -> list[dict[str, Any]]:
    """Every training job the endpoint holds (ListTrainingJobs, all pages)."""
    client = endpoint.client("sagemaker")
    jobs: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"MaxResults": 100}
    while True:
        page = client.list_training_jobs(**kwargs)
        jobs += page["TrainingJobSummaries"]
        if not page.get("NextToken"):
            return jobs
        kwargs["NextToken"] = page["NextToken"]


def step_counts(log: str) -> dict[int, int]:
    """How many times each ``adt-step i/N`` line of the job shows in a task log, as the trigger
    streamed it (the task's repeat of the job's last lines aside)."""
    counts: dict[int, int] = {}
    streamed = "\n".join(line for line in log.splitlines() if JOB_LAST_LINE not in line)
    for match in STEP.finditer(streamed):
        counts[int(match.group(1))] = counts.get(int(match.group(1)), 0) + 1
    return counts
