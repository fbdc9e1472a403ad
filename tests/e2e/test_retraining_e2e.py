"""The retraining DAG through Airflow's real services, triggered over REST as the UI's form does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.airflow_services import AirflowApi, AirflowServices

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("airflow-e2e")]
DAG_ID = "distributed_retraining"


def test_retraining_dag_succeeds_on_the_local_backend(airflow_api: AirflowApi) -> None:
    airflow_api.wait_for_dag(DAG_ID)
    airflow_api.unpause(DAG_ID)
    # Unpausing may also start the latest scheduled run (6 epochs); ours still trains its own 8
    # epochs from scratch (a new run never resumes another run's checkpoint).
    run_id = airflow_api.trigger_run(DAG_ID, {"backend": "local", "epochs": 8, "learning_rate": 0.05})
    run = airflow_api.wait_for_run(DAG_ID, run_id, timeout=600)
    assert run["state"] == "success"
    states = {ti["task_id"]: ti["state"] for ti in airflow_api.task_instances(DAG_ID, run_id)}
    assert states["local.train"] == "success"
    assert states["local.gate"] == "success"
    assert states["sagemaker.train"] == "skipped"
    training = airflow_api.xcom(DAG_ID, run_id, "local.train")
    assert training["status"] == "Completed" and training["backend"] == "local"
    assert training["model_artifact_uri"].endswith("model.tar.gz")
    # per-epoch progress reached the task log while the job ran
    log = airflow_api.task_log(DAG_ID, run_id, "local.train")
    assert "epoch=7 loss=" in log
    # the summary names the gate's decision (against the scheduled run's model, if it registered first)
    summary = airflow_api.xcom(DAG_ID, run_id, "summary")
    assert summary["gate_passed"] in (True, False) and summary["gate_reasons"]
    assert summary["model_artifact_uri"] == training["model_artifact_uri"]


@pytest.mark.timeout(1500)
def test_an_upstream_asset_update_starts_a_retraining_run(airflow_api: AirflowApi) -> None:
    """The real scheduler: demo_new_training_data updates the training-data asset -> a run starts.

    The scheduler creates the asset-triggered run once the DAG is below ``max_active_runs``: a
    scheduled run still training (a loaded machine) delays it, so the wait allows for one run."""
    import time

    producer = "demo_new_training_data"
    airflow_api.wait_for_dag(producer)
    airflow_api.wait_for_dag(DAG_ID)
    airflow_api.unpause(DAG_ID)
    airflow_api.unpause(producer)
    before = {r["dag_run_id"] for r in airflow_api.get(f"/dags/{DAG_ID}/dagRuns")["dag_runs"]}
    run_id = airflow_api.trigger_run(producer, {"seed": 5})
    airflow_api.wait_for_run(producer, run_id, timeout=300)
    deadline = time.monotonic() + 600
    triggered: list[dict] = []
    while not triggered and time.monotonic() < deadline:
        runs = airflow_api.get(f"/dags/{DAG_ID}/dagRuns")["dag_runs"]
        triggered = [r for r in runs if r["dag_run_id"] not in before and r["run_type"] == "asset_triggered"]
        time.sleep(2)
    assert triggered, f"no asset-triggered run of {DAG_ID} within 600 s: {runs}"
    run = airflow_api.wait_for_run(DAG_ID, triggered[0]["dag_run_id"], timeout=600)
    assert run["state"] == "success"
    lineage = airflow_api.xcom(DAG_ID, run["dag_run_id"], "local.check_changes", key="lineage")
    assert lineage["data_fingerprint"].startswith("sha256:")


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"instance_count": 0}, "0 is less than the minimum of 1"),
        ({"strategy": "horovod"}, "'horovod' is not one of"),
        ({"backend": "kubernetes"}, "'kubernetes' is not one of"),
        ({"learning_rate": 0}, "0 is less than or equal to the minimum of 0"),
    ],
)
def test_trigger_form_rejects_bad_input_with_the_params_message(
    airflow_api: AirflowApi, conf: dict, message: str
) -> None:
    airflow_api.wait_for_dag(DAG_ID)
    response = airflow_api.trigger(DAG_ID, conf)
    assert response.status_code == 400
    assert message in response.text


def test_retraining_trigger_form_screenshot(
    airflow_services: AirflowServices, airflow_api: AirflowApi, tmp_path: Path
) -> None:
    import shutil

    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    airflow_api.wait_for_dag(DAG_ID)
    out = tmp_path / "retraining-trigger-form.png"  # docs/img/ holds the committed copy
    rc = airflow_services.screenshot_trigger_form(DAG_ID, out)
    assert rc == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
