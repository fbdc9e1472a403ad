"""Fixtures for the evaluation integration tests: clean moto server, a bucket, boto3 clients."""

from __future__ import annotations

import os
from typing import Any

import pytest

BUCKET = "adt-eval-tests"
REGION = "us-east-1"


@pytest.fixture
def s3(moto_reset: str) -> Any:
    import boto3

    client = boto3.client("s3", region_name=REGION, endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def sagemaker(moto_reset: str) -> Any:
    import boto3

    return boto3.client("sagemaker", region_name=REGION, endpoint_url=os.environ["AWS_ENDPOINT_URL"])
