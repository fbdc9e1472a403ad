"""Load: the most deferred training tasks the stack holds at once before a heartbeat is missed.

Rounds of N concurrent runs of ``adt_prod_training`` (each: plan, upload, describe-before-create,
create, defer), N growing, on the production-like stack (two Celery workers of 8 slots, two
triggerers, ``task_instance_heartbeat_timeout`` = 20 s). A round holds when every task defers with
its job and the scheduler logs no "task instance without a heartbeat"; the figure is the largest N
that held. Run by ``bench/submit_path.py --capacity`` only (``ADT_PRODSTACK_CAPACITY=1``): minutes
per round, and its figure needs a quiet machine.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod.scenarios import task_instance, wait_until
from tests.e2e.prod_stack import ProdStack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.prodstack,
    pytest.mark.xdist_group("airflow-prodstack"),
    pytest.mark.timeout(7200),
    pytest.mark.skipif(
        os.environ.get("ADT_PRODSTACK_CAPACITY") != "1", reason="a benchmark: bench/submit_path.py --capacity"
    ),
]

DAG_ID = "adt_prod_training"
MISSED = "Detected a task instance without a heartbeat"


def run_round(stack: ProdStack, api: AirflowApi, endpoint: Any, tasks: int) -> dict[str, Any]:
    endpoint.reset()
    endpoint.client("s3").create_bucket(Bucket="adt-prod-stack")
    missed_before = stack.log_tail("scheduler", 100000).count(MISSED)
    started = time.monotonic()
    run_ids = [api.trigger_run(DAG_ID, {"seconds": 240}) for _ in range(tasks)]
    states: dict[str, str] = {}

    def settled() -> bool:
        for run_id in run_ids:
            states[run_id] = str(task_instance(api, DAG_ID, run_id)["state"])
        return all(s in ("deferred", "success", "failed", "up_for_retry") for s in states.values())

    wait_until(f"{tasks} tasks defer", settled, 900, stack, poll=3)
    deferred = sum(s == "deferred" for s in states.values())
    missed = stack.log_tail("scheduler", 100000).count(MISSED) - missed_before
    seconds = time.monotonic() - started
    for run_id in run_ids:  # end the round: marking failed stops each job
        api.request(
            "PATCH", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/train", json={"new_state": "failed"}
        )
    return {"tasks": tasks, "deferred": deferred, "missed_heartbeats": missed, "seconds_to_defer": seconds}


def test_the_most_deferred_tasks_before_a_missed_heartbeat(
    prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any
) -> None:
    prod_api.wait_for_dag(DAG_ID)
    prod_api.unpause(DAG_ID)
    sizes = [int(n) for n in os.environ.get("ADT_CAPACITY_SIZES", "16,32,48,64").split(",")]
    held = 0
    for size in sizes:
        result = run_round(prod_stack, prod_api, endpoint, size)
        print(f"\ncapacity round: {result}", flush=True)
        time.sleep(30)  # the stops land and the jobs end before the next round
        if result["missed_heartbeats"] or result["deferred"] < size:
            break
        held = size
    print(
        f"\ncapacity: {held} concurrent deferred training tasks held without a missed heartbeat", flush=True
    )
