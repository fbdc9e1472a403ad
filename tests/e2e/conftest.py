"""Fixtures for end-to-end tests against Airflow's own services (see tests/e2e/README.md).

``airflow_services`` (session scope) starts api-server, scheduler, dag-processor and triggerer on
127.0.0.1 with a temporary AIRFLOW_HOME and stops the whole process group at the end, even when a
test fails or the session is interrupted. Mark e2e tests with ``pytest.mark.e2e`` and
``pytest.mark.xdist_group("airflow-e2e")`` so that, under ``-n 2 --dist loadgroup``, they share one
set of services on one worker.
"""

from __future__ import annotations

import atexit
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.airflow_services import AirflowApi, AirflowServices


@pytest.fixture(scope="session")
def airflow_services_extra_env() -> dict[str, str]:
    """Extra environment for the services; override this fixture in a conftest to add connections etc."""
    return {}


@pytest.fixture(scope="session")
def airflow_services(
    tmp_path_factory: pytest.TempPathFactory, airflow_services_extra_env: dict[str, str]
) -> Iterator[AirflowServices]:
    """Airflow's four services, healthy, on 127.0.0.1 (``.base_url``); stopped at session end."""
    home: Path = tmp_path_factory.mktemp("airflow-e2e-home")
    services = AirflowServices(home=home, extra_env=dict(airflow_services_extra_env))
    atexit.register(services.stop)  # also on KeyboardInterrupt / an aborted session
    services.start()
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
