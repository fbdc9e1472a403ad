"""Fixtures of the production-like stack's scenarios (``tests/e2e/prod_stack.py``, tests/e2e/README.md).

``prod_stack`` (session scope) starts PostgreSQL, Redis, the SageMaker test endpoint and Airflow's
api-server, scheduler (CeleryExecutor), dag-processor, two triggerers and two Celery workers, and
stops all of them at the end. Mark tests ``pytest.mark.prodstack`` and
``pytest.mark.xdist_group("airflow-prodstack")``: under ``-n 2 --dist loadgroup`` they share one
stack on one worker. Without Debian's postgresql/redis-server or the celery provider they skip.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.datasets import make_dataset
from tests.e2e.airflow_services import E2E_DAGS, AirflowApi
from tests.e2e.prod_stack import PostgresCluster, ProdStack, RedisServer, prerequisites_missing

PROD_DAGS = Path(__file__).resolve().parent / "dags"
BUCKET = "adt-prod-stack"


@pytest.fixture(scope="session")
def prod_stack(tmp_path_factory: pytest.TempPathFactory, sagemaker_emulator: Any) -> Iterator[ProdStack]:
    """The whole stack, healthy; every service's log is in ``<home>/service-logs``."""
    reason = prerequisites_missing()
    if reason:
        pytest.skip(reason)
    # the shipped retraining DAG's workspace: its demo dataset (the evaluation's test split is read
    # from here; the training data goes to the endpoint's S3 in the test), run summaries
    demo = tmp_path_factory.mktemp("prod-demo")
    make_dataset(demo / "source", train=400, test=200, seed=0)
    postgres = PostgresCluster().start()
    atexit.register(postgres.stop)
    redis = RedisServer().start()
    atexit.register(redis.stop)
    stack = ProdStack(
        home=tmp_path_factory.mktemp("airflow-prod-home"),
        extra_bundles={"e2e-dags": E2E_DAGS, "prod-dags": PROD_DAGS},
        extra_env={
            "AWS_ENDPOINT_URL": sagemaker_emulator.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "ADT_PROD_BUCKET": BUCKET,
            "ADT_DEMO_DIR": str(demo),
        },
        database_url=postgres.url,
        broker_url=redis.url,
    )
    atexit.register(stack.stop)
    try:
        stack.start(timeout=float(os.environ.get("ADT_E2E_STARTUP_TIMEOUT", "600")))
        yield stack
    finally:
        stack.stop()
        redis.stop()
        postgres.stop()


@pytest.fixture(scope="session")
def prod_api(prod_stack: ProdStack) -> Iterator[AirflowApi]:
    api = prod_stack.api()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def endpoint(sagemaker_emulator: Any) -> Any:
    """The emulator, emptied, with the stack's bucket."""
    sagemaker_emulator.reset()
    sagemaker_emulator.client("s3").create_bucket(Bucket=BUCKET)
    return sagemaker_emulator
