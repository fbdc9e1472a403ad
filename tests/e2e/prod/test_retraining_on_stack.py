"""Scenario 6: the shipped ``distributed_retraining`` DAG, three runs, ``backend=sagemaker`` against the
SageMaker test endpoint, on the production-like stack (PostgreSQL, Celery workers, two triggerers).

The same versions and skips as on the local stack (tests/integration/retraining/): run 1 (new data)
trains, passes the gate and registers ``adt-demo/1``; run 2 (the same data, code and spec) is skipped
with the reason, no job, no version; run 3 (new data, warm start from the champion) trains again
and registers ``adt-demo/2`` if its gate passes against the champion (else nothing is registered).

Heavy (three real torch jobs and evaluation jobs on 2 cores): at reduced scale (CI) runs 1 and 2. It counts only its own runs' jobs: the
endpoint may still hold (or receive) jobs of the scenarios before it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.datasets import make_dataset
from tests.e2e.airflow_services import AirflowApi
from tests.e2e.prod.scenarios import heavy_scale, heavy_scenario_marks, training_jobs
from tests.e2e.prod_stack import ProdStack

pytestmark = heavy_scenario_marks()
DAG_ID = "distributed_retraining"
BUCKET = "adt-demo-bucket"
CONF = {"backend": "sagemaker", "epochs": 3}
# At reduced scale (CI) the third run, a retrain on new data, is left to the dag.test() scenarios
# on the endpoint (tests/integration/retraining/): the stack's part is proven by runs 1 and 2.
RUNS = heavy_scale(3, 2)


def test_three_retraining_runs_on_sagemaker(
    prod_stack: ProdStack, prod_api: AirflowApi, endpoint: Any, tmp_path: Path
) -> None:
    s3, sm = endpoint.client("s3"), endpoint.client("sagemaker")
    s3.create_bucket(Bucket=BUCKET)
    demo = Path(prod_stack.extra_env["ADT_DEMO_DIR"])  # its dataset (seed 0) came with the stack
    s3.upload_file(str(demo / "source" / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    prod_api.wait_for_dag(DAG_ID)
    prod_api.unpause(DAG_ID)
    # unpausing starts the latest scheduled run (backend=local, max_active_runs=1): not this
    # scenario's; fail it so that it neither holds the run slot nor registers a model
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        scheduled = prod_api.get(f"/dags/{DAG_ID}/dagRuns", params={"run_type": "scheduled"})["dag_runs"]
        for found in scheduled:
            prod_api.request(
                "PATCH", f"/dags/{DAG_ID}/dagRuns/{found['dag_run_id']}", json={"state": "failed"}
            )
        if scheduled:
            break
        time.sleep(2)

    run_ids: list[str] = []

    def run(conf: dict[str, Any]) -> dict[str, str]:
        run_ids.append(prod_api.trigger_run(DAG_ID, conf))
        prod_api.wait_for_run(DAG_ID, run_ids[-1], timeout=1200)
        return {ti["task_id"]: ti["state"] for ti in prod_api.task_instances(DAG_ID, run_ids[-1])}

    def own_jobs() -> list[str]:
        """This scenario's training jobs: the ones whose names carry its runs' identities."""
        names = []
        for run_id in run_ids:  # a skipped run has no link
            response = prod_api.request(
                "GET",
                f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/sagemaker.train/xcomEntries/sagemaker_training_job",
                params={"deserialize": "true", "stringify": "false"},
            )
            link = response.json().get("value") if response.status_code == 200 else None
            if isinstance(link, dict) and link.get("job_name"):
                names.append(str(link["job_name"]))
        return sorted(
            j["TrainingJobName"]
            for j in training_jobs(endpoint)
            if any(j["TrainingJobName"].startswith(name) for name in names)
        )

    def versions() -> list[int]:
        found = sm.list_model_packages(ModelPackageGroupName="adt-demo")["ModelPackageSummaryList"]
        return sorted(p["ModelPackageVersion"] for p in found)

    states = run(CONF)
    for task in ("check_changes", "train", "evaluate", "gate", "register"):
        assert states[f"sagemaker.{task}"] == "success", (task, states)
    assert len(own_jobs()) == 1
    assert versions() == [1]

    states = run(CONF)  # the same data, code and spec
    assert states["sagemaker.check_changes"] == "success"
    reason = prod_api.task_log(DAG_ID, run_ids[-1], "sagemaker.check_changes")
    assert "no new data or code since champion adt-demo/1" in reason, reason[-3000:]
    for task in ("train", "evaluate", "gate", "register"):
        assert states[f"sagemaker.{task}"] == "skipped", (task, states)
    assert len(own_jobs()) == 1
    assert versions() == [1]

    if RUNS < 3:
        return
    make_dataset(tmp_path / "d7", train=400, test=200, seed=7)  # new data arrives
    s3.upload_file(str(tmp_path / "d7" / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    states = run({**CONF, "warm_start": "champion"})  # as the local stack's run 3
    for task in ("check_changes", "train", "evaluate", "gate"):
        assert states[f"sagemaker.{task}"] == "success", (task, states)
    assert len(own_jobs()) == 2
    summary = (demo / "last-run-summary.txt").read_text()
    if "Quality gate        PASSED" in summary:  # the gate compares with the champion, v1
        assert states["sagemaker.register"] == "success" and versions() == [1, 2], summary
    else:
        assert "REJECTED" in summary and versions() == [1], summary
