"""Fixtures for the training integration tests: moto server + the lifecycle fake + a hook."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_sagemaker_training import FakeTrainingLifecycle


@pytest.fixture
def lifecycle_fake(moto_server: str) -> Iterator[FakeTrainingLifecycle]:
    # Per test: the fake patches moto's SageMaker responses in this process, and other tests on
    # the same xdist worker (the trigger tests) drive job states by hand.
    fake = FakeTrainingLifecycle()
    fake.install()
    yield fake
    fake.uninstall()


@pytest.fixture
def fake(
    moto_reset: str, lifecycle_fake: FakeTrainingLifecycle, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeTrainingLifecycle]:
    """A clean moto server with the SageMaker lifecycle fake installed (jobs start InProgress).

    The spec's FSx channel names a file system moto cannot describe as AVAILABLE: the FSx
    pre-flight is recorded here instead (``fake.fsx_preflights``); its own test runs it for real."""
    import airflow_dist_training.fsx.preflight as fsx_preflight

    lifecycle_fake.reset()
    lifecycle_fake.fsx_preflights = []  # type: ignore[attr-defined]
    monkeypatch.setattr(
        fsx_preflight,
        "preflight_training_spec",
        lambda hook, spec, az_mismatch="error": lifecycle_fake.fsx_preflights.append(spec.name) or [],  # type: ignore[attr-defined]
    )
    yield lifecycle_fake
    lifecycle_fake.reset()


@pytest.fixture
def hook(fake: FakeTrainingLifecycle) -> Any:
    from airflow_dist_training.hooks.training import SageMakerTrainingHook

    h = SageMakerTrainingHook(aws_conn_id=None, region_name="us-east-1", max_attempts=2)
    h.throttle_base_delay = 0.01
    return h


@pytest.fixture
def boto(fake: FakeTrainingLifecycle) -> Any:
    import boto3

    class Clients:
        sagemaker = boto3.client(
            "sagemaker", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"]
        )
        logs = boto3.client("logs", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"])

    return Clients
