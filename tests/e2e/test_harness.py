"""The e2e harness itself: real Airflow services, a run triggered over REST with a conf, the triggerer."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.e2e.airflow_services import AirflowApi, AirflowServices

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("airflow-e2e")]

DAG_ID = "adt_e2e_params"


def test_services_report_healthy(airflow_services: AirflowServices) -> None:
    health = airflow_services.health()
    assert health is not None
    for part in ("metadatabase", "scheduler", "triggerer", "dag_processor"):
        assert health[part]["status"] == "healthy", health


def test_triggered_run_gets_conf_and_resumes_from_the_triggerer(airflow_api: AirflowApi) -> None:
    airflow_api.wait_for_dag(DAG_ID)
    airflow_api.unpause(DAG_ID)
    # Long enough for the worker that deferred to have exited and been reported before the trigger
    # fires: Airflow 3.3's scheduler fails a resumed task instance (state mismatch, "killed externally")
    # when the LocalExecutor's success event for the defer exit arrives after the resume was queued.
    # Seen in CI with 2 s on a loaded 2-core box.
    conf = {"instance_count": 4, "strategy": "smddp", "learning_rate": 0.01, "spot": True, "wait_seconds": 15}

    run_id = airflow_api.trigger_run(DAG_ID, conf)
    run = airflow_api.wait_for_run(DAG_ID, run_id, timeout=240)

    assert run["state"] == "success"
    assert run["conf"] == conf
    params = airflow_api.xcom(DAG_ID, run_id, "check_params")
    assert params == {**conf, "instance_type": "ml.p4d.24xlarge", "dry_run": True}
    assert airflow_api.xcom(DAG_ID, run_id, "wait_in_triggerer") == {
        "resumed_from_trigger": True,
        "waited_seconds": 15,
    }
    log = airflow_api.task_log(DAG_ID, run_id, "wait_in_triggerer")
    assert "trigger" in log.lower()


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"instance_count": 99}, "99 is greater than the maximum of 16"),
        ({"strategy": "horovod"}, "'horovod' is not one of"),
        ({"learning_rate": 0}, "less than or equal to the minimum of 0"),
    ],
)
def test_invalid_conf_is_rejected_with_400_and_the_param_message(
    airflow_api: AirflowApi, conf: dict[str, object], message: str
) -> None:
    airflow_api.wait_for_dag(DAG_ID)
    before = airflow_api.get(f"/dags/{DAG_ID}/dagRuns")["total_entries"]

    response = airflow_api.trigger(DAG_ID, conf)

    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert message in str(detail)
    param = next(iter(conf))
    assert f"Invalid input for param {param}" in str(detail)
    assert airflow_api.get(f"/dags/{DAG_ID}/dagRuns")["total_entries"] == before


def test_trigger_form_screenshot_shows_the_params_dialog(
    airflow_services: AirflowServices, airflow_api: AirflowApi, tmp_path: Path
) -> None:
    import shutil

    if shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it)")
    airflow_api.wait_for_dag(DAG_ID)
    out = tmp_path / "trigger-form.png"
    rc = airflow_services.screenshot_trigger_form(DAG_ID, out)

    assert rc == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 600 and height > 600, (width, height)
