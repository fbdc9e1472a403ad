"""FingerprintHook against the moto server (S3) and the local file system."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.hooks.fingerprint import FingerprintHook

pytestmark = pytest.mark.integration
BUCKET = "adt-fingerprint-tests"


@pytest.fixture
def s3(moto_reset: str) -> Any:
    import boto3

    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return client


def test_s3_channel_fingerprint_is_one_paginated_listing_and_sees_new_content(s3: Any) -> None:
    from moto.backends import get_backend

    backend = get_backend("s3")["123456789012"]["global"]  # the server's, seeded in-process: fast
    for i in range(1500):
        backend.put_object(BUCKET, f"data/train/part-{i:05d}.csv", b"x" * (i % 7))
    s3.put_object(Bucket=BUCKET, Key="data/trainee/not-mine.csv", Body=b"y")  # a sibling prefix
    hook = FingerprintHook(aws_conn_id=None, region_name="us-east-1")
    calls: list[str] = []
    hook.s3.meta.events.register("before-call.s3", lambda model, **_: calls.append(model.name))
    first = hook.channel_fingerprint(f"s3://{BUCKET}/data/train/")
    assert calls == ["ListObjectsV2", "ListObjectsV2"]  # 1,500 objects: two pages, no GET or HEAD
    assert first["objects"] == 1500 and first["source"] == f"s3://{BUCKET}/data/train/"
    assert hook.channel_fingerprint(f"s3://{BUCKET}/data/train/")["fingerprint"] == first["fingerprint"]
    s3.put_object(Bucket=BUCKET, Key="data/train/part-00007.csv", Body=b"new content!")
    assert hook.channel_fingerprint(f"s3://{BUCKET}/data/train/")["fingerprint"] != first["fingerprint"]


def test_local_channel_fingerprint_hashes_content_not_timestamps(tmp_path: Path) -> None:
    data = tmp_path / "train"
    data.mkdir()
    (data / "a.csv").write_text("label,f0\n1,0.5\n")
    (data / ".manifest.json").write_text('{"files": {}}')
    hook = FingerprintHook(aws_conn_id=None)
    first = hook.channel_fingerprint(str(data))
    assert first["objects"] == 1  # the staging manifest is not data
    time.sleep(0.01)
    (data / "a.csv").write_text("label,f0\n1,0.5\n")  # rewritten, same bytes
    (data / ".manifest.json").write_text('{"files": {"a.csv": {}}}')
    assert hook.channel_fingerprint(str(data))["fingerprint"] == first["fingerprint"]
    (data / "a.csv").write_text("label,f0\n1,0.6\n")
    assert hook.channel_fingerprint(str(data))["fingerprint"] != first["fingerprint"]


def _model_tar(path: Path, weights: bytes, mtime: float) -> str:
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("model.pt")
        info.size, info.mtime = len(weights), mtime
        tar.addfile(info, io.BytesIO(weights))
    return path.as_uri()


def test_model_archives_with_the_same_files_are_the_same_model_whatever_their_timestamps(
    tmp_path: Path,
) -> None:
    hook = FingerprintHook(aws_conn_id=None)
    a = _model_tar(tmp_path / "a.tar.gz", b"weights-1", 1_000)
    b = _model_tar(tmp_path / "b.tar.gz", b"weights-1", 2_000)
    c = _model_tar(tmp_path / "c.tar.gz", b"weights-2", 1_000)
    assert (tmp_path / "a.tar.gz").read_bytes() != (tmp_path / "b.tar.gz").read_bytes()
    assert hook.same_model(a, b) is True
    assert hook.same_model(a, c) is False


def test_model_on_s3_compared_with_a_local_one_by_content(s3: Any, tmp_path: Path) -> None:
    local = _model_tar(tmp_path / "a.tar.gz", b"weights-1", 1_000)
    _model_tar(tmp_path / "b.tar.gz", b"weights-1", 5_000)
    s3.put_object(
        Bucket=BUCKET, Key="models/job-2/output/model.tar.gz", Body=(tmp_path / "b.tar.gz").read_bytes()
    )
    s3.put_object(Bucket=BUCKET, Key="models/job-3/output/model.pt", Body=b"not an archive")
    hook = FingerprintHook(aws_conn_id=None, region_name="us-east-1")
    assert hook.same_model(f"s3://{BUCKET}/models/job-2/output/model.tar.gz", local) is True
    assert hook.model_digest(f"s3://{BUCKET}/models/job-3/output/model.pt").startswith("sha256:")
    assert hook.same_model(f"s3://{BUCKET}/models/job-3/output/model.pt", local) is False


def test_whether_the_champions_model_is_still_there_on_s3_and_locally(s3: Any, tmp_path: Path) -> None:
    hook = FingerprintHook(aws_conn_id=None, region_name="us-east-1")
    s3.put_object(Bucket=BUCKET, Key="models/job-1/output/model.tar.gz", Body=b"weights" * 1000)
    s3.put_object(Bucket=BUCKET, Key="models/job-1/output/model.tar.gz.sha256", Body=b"x")  # not a match
    assert hook.model_exists(f"s3://{BUCKET}/models/job-1/output/model.tar.gz") is True
    s3.delete_object(Bucket=BUCKET, Key="models/job-1/output/model.tar.gz")
    assert hook.model_exists(f"s3://{BUCKET}/models/job-1/output/model.tar.gz") is False
    model = tmp_path / "models" / "job-1" / "output" / "model.tar.gz"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"weights")
    assert hook.model_exists(str(model)) is True and hook.model_exists(model.as_uri()) is True
    (tmp_path / "checkpoint").mkdir()
    assert hook.model_exists(str(tmp_path / "checkpoint")) is False  # an empty folder holds no model
    (tmp_path / "checkpoint" / "model.pt").write_bytes(b"w")
    assert hook.model_exists(str(tmp_path / "checkpoint")) is True
    model.unlink()
    assert hook.model_exists(str(model)) is False
