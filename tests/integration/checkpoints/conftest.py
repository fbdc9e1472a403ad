"""Fixtures for checkpoint-store tests against the shared moto server."""

from __future__ import annotations

import pathlib
import tempfile
from collections.abc import Iterable

import boto3
import pytest

from airflow_dist_training.checkpointing import CheckpointWriter

BUCKET = "ckpt-bucket"


@pytest.fixture
def s3(moto_reset):
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def hook(s3):
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    return CheckpointHook(aws_conn_id=None, region_name="us-east-1")


def backend_put(bucket: str, key: str, body: bytes) -> None:
    """Write straight into the in-process moto backend (the server shares it): fast bulk seeding."""
    from moto.backends import get_backend

    get_backend("s3")["123456789012"]["global"].put_object(bucket, key, body)


def put_checkpoint(
    client,
    prefix: str,
    step: int,
    *,
    files: dict[str, bytes] | None = None,
    metrics: dict[str, float] | None = None,
    skip: Iterable[str] = (),
    truncate: Iterable[str] = (),
    hint: bool = True,
    bucket: str = BUCKET,
    fast: bool = False,
) -> str:
    """Write a checkpoint with the real writer, then upload it (minus ``skip``, with ``truncate`` cut).

    ``fast=True`` writes through moto's in-process backend instead of HTTP (for many files).
    """
    files = files if files is not None else {"model.pt": b"m" * 10, "optim/rank0.pt": b"o" * 5}
    skip, truncate = set(skip), set(truncate)
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        with CheckpointWriter(root, rank=0, checksums=False, fsync=False).checkpoint(
            step=step, epoch=1, metrics=metrics or {}, world_size=2
        ) as directory:
            for rel, body in files.items():
                (directory / rel).parent.mkdir(parents=True, exist_ok=True)
                (directory / rel).write_bytes(body)
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            inner = rel.partition("/")[2]
            if inner in skip or (rel == "_LATEST.json" and not hint):
                continue
            body = path.read_bytes()
            if inner in truncate:
                body = body[: len(body) // 2]
            if fast:
                backend_put(bucket, f"{prefix}{rel}", body)
            else:
                client.put_object(Bucket=bucket, Key=f"{prefix}{rel}", Body=body)
    return f"s3://{bucket}/{prefix}step-{step:012d}/"
