"""Shared test fixtures.

Each pytest-xdist worker gets its own AIRFLOW_HOME (and so its own SQLite metadata DB), migrated
once per worker and reused by every test on it. Services (moto server) are started and stopped by
the fixtures that need them.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# fails the session when a test wrote into the repository (tests/repo_guard.py)
pytest_plugins = ["tests.repo_guard"]

# Must happen before anything imports airflow.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
_home = Path(tempfile.gettempdir()) / f"adt-airflow-home-{os.getpid()}-{_worker}"
_home.mkdir(parents=True, exist_ok=True)
os.environ["AIRFLOW_HOME"] = str(_home)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO_ROOT / "dags")
os.environ.setdefault("AIRFLOW__CORE__EXECUTOR", "LocalExecutor")
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_home}/airflow.db"
# Never reach real AWS from tests.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.pop("AWS_PROFILE", None)
# SageMaker's stop waits 120 s for a process that ignores SIGTERM; the local backend and the test
# endpoint wait 3 s in tests (local/request_plan.py: default_stop_grace_seconds)
os.environ.setdefault("ADT_STOP_GRACE_SECONDS", "3")
# Jobs run as users get them: in the default job environment (torch, torchvision, numpy, AWS's
# toolkit, nothing of this provider; local/job_env.py), which scripts/setup.sh builds. A test that
# pins another interpreter says why on that line.
os.environ.pop("ADT_LOCAL_PYTHON", None)


def _share_botocore_loader() -> None:
    """One botocore data loader per test process.

    Every new boto3/botocore session otherwise re-reads and re-parses the service model JSON
    (seconds per test for hooks that build several clients). The models never change within a run.
    """
    import botocore.loaders
    import botocore.session

    shared: dict[str | None, botocore.loaders.Loader] = {}
    original = botocore.loaders.create_loader

    def create_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in shared:
            shared[search_path_string] = original(search_path_string)
        return shared[search_path_string]

    botocore.session.create_loader = create_loader  # type: ignore[attr-defined]


_share_botocore_loader()


def _hypothesis_profiles() -> None:
    """CI replays the same examples (a landing must not depend on luck); explore with
    ``HYPOTHESIS_PROFILE=explore`` to search new ones (failures found are stored and replayed)."""
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.register_profile("explore", derandomize=False, max_examples=2000)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_hypothesis_profiles()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def airflow_db() -> Iterator[Path]:
    """A migrated Airflow metadata DB for this worker (created once, reused)."""
    marker = _home / ".migrated"
    if not marker.exists():
        from airflow.utils.db import resetdb

        resetdb()
        marker.touch()
    _cache_in_process_execution_api()
    yield _home


def _cache_in_process_execution_api() -> None:
    """Build dag.test()'s in-process Execution API app once per worker, as Airflow 3.3 does.

    Before 3.3 ``in_process_api_server`` builds a new app for every task of every ``dag.test()``
    (seconds each: a multi-run DAG test took 10+ minutes on 3.1.8).
    """
    import functools

    from airflow.sdk.execution_time import supervisor

    if not hasattr(supervisor.in_process_api_server, "cache_info"):
        supervisor.in_process_api_server = functools.lru_cache(maxsize=1)(supervisor.in_process_api_server)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 (server mode: aiobotocore cannot use ``mock_aws``).

    Yields the endpoint URL; ``AWS_ENDPOINT_URL`` is set so boto3, aiobotocore and the Amazon
    provider's hooks all talk to it.
    """
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    old = os.environ.get("AWS_ENDPOINT_URL")
    os.environ["AWS_ENDPOINT_URL"] = url
    try:
        yield url
    finally:
        server.stop()
        if old is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = old


@pytest.fixture
def moto_reset(moto_server: str) -> Iterator[str]:
    """Reset moto's state before a test that uses the shared server."""
    import requests

    requests.post(f"{moto_server}/moto-api/reset", timeout=10)
    yield moto_server


@pytest.fixture(scope="session")
def job_env_python() -> Path:
    """The default job environment's interpreter: what every job in the suite runs with.

    scripts/setup.sh builds it; a missing or outdated one fails the test (never a skip: CI must
    prove the jobs run in what an AWS image has)."""
    from airflow_dist_training.local import job_env

    where = job_env.default_env_dir()
    problem = job_env.why_not_ready(where)
    if problem:
        pytest.fail(f"the default job environment at {where} is {problem}: `airflow-dist-training job-env` builds it")
    return where / "bin" / "python"
