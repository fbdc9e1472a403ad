"""Fixtures for end-to-end tests against Airflow's own services (see tests/e2e/README.md).

``airflow_services`` (session scope) starts api-server, scheduler, dag-processor and triggerer on
127.0.0.1 with a temporary AIRFLOW_HOME and stops the whole process group at the end, even when a
test fails or the session is interrupted. Mark e2e tests with ``pytest.mark.e2e`` and
``pytest.mark.xdist_group("airflow-e2e")`` so that, under ``-n 2 --dist loadgroup``, they share one
set of services on one worker.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_dist_training.emulator.pytest_plugin import EmulatorProcess
from tests.e2e.airflow_services import AirflowApi, AirflowServices
from tests.paths import REPO

FAULT_MOTO_CONN_ID = "adt_e2e_fault_moto"  # tests/e2e/dags/adt_e2e_kill.py uses it


@pytest.fixture(scope="session")
def airflow_services_extra_env(
    tmp_path_factory: pytest.TempPathFactory, moto_server: str, sagemaker_emulator: EmulatorProcess
) -> dict[str, str]:
    """Extra environment for the services: the retraining DAG's workspace, with its demo dataset;
    the session's SageMaker test endpoint as AWS (it runs real jobs in the default job
    environment); and the connection ``adt_e2e_fault_moto`` to this session's moto server, for the
    DAGs whose test injects faults into moto in this process (``FakeTrainingLifecycle``)."""
    import subprocess
    import sys

    demo = tmp_path_factory.mktemp("e2e-demo")
    repo = REPO
    subprocess.run(
        [sys.executable, str(repo / "examples" / "make_dataset.py"), "--out", str(demo / "source")],
        check=True,
        capture_output=True,
    )
    import json

    return {
        # OpenLineage's file transport: every task's events, one JSON a line (test_training_view_e2e)
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(demo / "openlineage.jsonl"), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "adt-e2e",
        "ADT_DEMO_DIR": str(demo),
        "ADT_LOCAL_ROOT": str(demo / "jobs"),
        "AWS_ENDPOINT_URL": sagemaker_emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        f"AIRFLOW_CONN_{FAULT_MOTO_CONN_ID.upper()}": json.dumps(
            {
                "conn_type": "aws",
                "login": "testing",
                "password": "testing",
                "extra": {"endpoint_url": moto_server, "region_name": "us-east-1"},
            }
        ),
    }


@pytest.fixture(scope="session")
def airflow_services(
    tmp_path_factory: pytest.TempPathFactory, airflow_services_extra_env: dict[str, str]
) -> Iterator[AirflowServices]:
    """Airflow's four services, healthy, on 127.0.0.1 (``.base_url``); stopped at session end."""
    home: Path = tmp_path_factory.mktemp("airflow-e2e-home")
    services = AirflowServices(home=home, extra_env=dict(airflow_services_extra_env))
    atexit.register(services.stop)  # also on KeyboardInterrupt / an aborted session
    # a loaded 2-core box (parallel sessions) can take minutes to bring up four services
    services.start(timeout=float(os.environ.get("ADT_E2E_STARTUP_TIMEOUT", "600")))
    try:
        yield services
    finally:
        services.stop()


@pytest.fixture(scope="session")
def airflow_api(airflow_services: AirflowServices) -> Iterator[AirflowApi]:
    """A REST API v2 client logged in (JWT from POST /auth/token) as the admin user."""
    api = airflow_services.api()
    try:
        yield api
    finally:
        api.close()
