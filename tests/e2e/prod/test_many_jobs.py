"""Scenario 1: 40 concurrent training tasks deferred across two triggerers, then across one.

All 40 succeed with exactly 40 jobs, none stopped (a task the scheduler fails for a missed heartbeat
retries and reattaches; the test prints the tries per task), and the triggers are spread over both
triggerers. The endpoint counts every SageMaker call (``state()["sagemaker_calls"]``); the test prints calls per job-hour
(all calls of the round / the jobs' summed run time) with two triggerers and with one (``triggerer-2``
stopped for the second round), and the calls by operation.

Heavy (80 jobs on the endpoint, several minutes on 2 cores): 40 tasks a round with
``ADT_PRODSTACK_HEAVY=1`` (``scripts/test-prod-stack.sh`` sets it), 16 in the default suite and CI.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod.scenarios import (
    heavy_scale,
    heavy_scenario_marks,
    task_instance,
    training_jobs,
    triggerer_hostnames,
    wait_until,
)
from tests.e2e.prod_stack import HOSTNAMES, ProdStack

pytestmark = heavy_scenario_marks()

DAG_ID = "adt_prod_training_many"  # retries=4: the round is past the stack's capacity (the DAG says why)
TASKS = heavy_scale(40, 16)
JOB_SECONDS = 60


def run_round(stack: ProdStack, api: AirflowApi, endpoint: Any) -> dict[str, Any]:
    """40 runs at once; returns the triggerers seen per task, the jobs and the calls."""
    endpoint.reset()
    endpoint.client("s3").create_bucket(Bucket="adt-prod-stack")
    run_ids = [api.trigger_run(DAG_ID, {"seconds": JOB_SECONDS}) for _ in range(TASKS)]
    seen: dict[str, str] = {}
    tries: dict[str, int] = {}

    def all_done() -> bool:
        hosts = triggerer_hostnames(api)
        done = 0
        for run_id in run_ids:
            ti = task_instance(api, DAG_ID, run_id)
            owner = (ti.get("trigger") or {}).get("triggerer_id")
            if ti["state"] == "deferred" and owner in hosts:
                seen[run_id] = hosts[owner]
            if ti["state"] in ("failed", "upstream_failed"):
                pytest.fail(f"{run_id} failed:\n{api.failure_report(DAG_ID, run_id)}")
            done += ti["state"] == "success"
            tries[run_id] = ti["try_number"]
        return done == TASKS

    wait_until(f"{TASKS} runs succeed", all_done, 1200, stack, poll=3)
    # this round's jobs: each run's job (the link XCom) and any later generation of it (``-r2``...)
    names = [
        api.xcom(DAG_ID, run_id, "train", key="sagemaker_training_job")["job_name"] for run_id in run_ids
    ]
    everything = training_jobs(endpoint)
    jobs = [j for j in everything if any(j["TrainingJobName"].startswith(name) for name in names)]
    assert len(set(names)) == TASKS, names
    client = endpoint.client("sagemaker")
    seconds = 0.0
    for job in jobs:
        desc = client.describe_training_job(TrainingJobName=job["TrainingJobName"])
        seconds += (desc["TrainingEndTime"] - desc["CreationTime"]).total_seconds()
    calls = endpoint.state()["sagemaker_calls"]
    other = sorted({j["TrainingJobName"] for j in everything} - {j["TrainingJobName"] for j in jobs})
    return {
        "seen": seen,
        "jobs": jobs,
        "job_hours": seconds / 3600,
        "calls": calls,
        "other": other,
        "tries": sorted(tries.values()),
    }


def test_forty_jobs_across_two_triggerers_then_one(
    prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any
) -> None:
    prod_api.wait_for_dag(DAG_ID)
    prod_api.unpause(DAG_ID)
    rounds = {}
    rounds["two triggerers"] = run_round(prod_stack, prod_api, endpoint)
    prod_stack.kill_service("triggerer-2", signal.SIGTERM)
    try:
        rounds["one triggerer"] = run_round(prod_stack, prod_api, endpoint)
    finally:
        prod_stack.start_service("triggerer-2")

    for name, result in rounds.items():
        total = sum(result["calls"].values())
        print(
            f"\n{name}: {total} SageMaker calls for {result['job_hours']:.2f} job-hours = "
            f"{total / result['job_hours']:.0f} calls/job-hour; by operation {result['calls']}; "
            f"triggers seen on {sorted(set(result['seen'].values()))}; jobs not of this round: {result['other']}; "
            f"tries per task (a retry is a heartbeat verdict the task survived): {result['tries']}"
        )
    for name, result in rounds.items():
        jobs = result["jobs"]
        assert len(jobs) == TASKS, (name, [j["TrainingJobName"] for j in jobs])  # 0 duplicates
        assert {j["TrainingJobStatus"] for j in jobs} == {"Completed"}  # none stopped
    assert set(rounds["two triggerers"]["seen"].values()) == {
        HOSTNAMES["triggerer-1"],
        HOSTNAMES["triggerer-2"],
    }
    assert set(rounds["one triggerer"]["seen"].values()) == {HOSTNAMES["triggerer-1"]}
