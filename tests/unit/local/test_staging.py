"""stage_local: copies, manifest, incremental re-runs, deletions, s3:// via moto."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from airflow_dist_training.local import staging
from airflow_dist_training.local.staging import stage_local
from airflow_dist_training.operators.fsx import LocalStageOperator
from airflow_dist_training.spec.training import FSxChannel
from airflow_dist_training.storage import LocalStore, StoreOptions, Stores


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the local store copied (what a skip must not do)."""
    seen: list[str] = []
    real = LocalStore.get_file

    def counting(self: LocalStore, loc: Any, path: Path) -> None:
        seen.append(loc.uri)
        real(self, loc, path)

    monkeypatch.setattr(LocalStore, "get_file", counting)
    return seen


def _tree(root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.bin").write_bytes(b"\x00" * 100)


def test_first_run_copies_and_writes_manifest(tmp_path: Path, copies: list[str]) -> None:
    _tree(tmp_path / "src")
    result = stage_local(str(tmp_path / "src"), tmp_path / "chan")
    assert sorted(result.copied) == ["a.txt", "sub/b.bin"] and len(copies) == 2
    manifest = json.loads((tmp_path / "chan" / ".manifest.json").read_text())
    assert manifest["files"]["a.txt"]["size"] == 5
    assert manifest["files"]["a.txt"]["sha256"] == staging.hashlib.sha256(b"alpha").hexdigest()
    assert (tmp_path / "chan" / "sub" / "b.bin").read_bytes() == b"\x00" * 100


def test_rerun_without_changes_copies_nothing(tmp_path: Path, copies: list[str]) -> None:
    _tree(tmp_path / "src")
    stage_local(f"file://{tmp_path / 'src'}", tmp_path / "chan")
    copies.clear()
    result = stage_local(f"file://{tmp_path / 'src'}", tmp_path / "chan")
    assert copies == [] and result.copied == [] and sorted(result.skipped) == ["a.txt", "sub/b.bin"]


def test_rerun_copies_changed_skips_touched_and_deletes_removed(tmp_path: Path, copies: list[str]) -> None:
    src = tmp_path / "src"
    _tree(src)
    stage_local(str(src), tmp_path / "chan")
    copies.clear()
    (src / "a.txt").write_text("ALPHA!")  # changed
    os.utime(src / "sub" / "b.bin", ns=(1, 1))  # touched, same content
    (src / "new.txt").write_text("n")
    (tmp_path / "gone").mkdir()
    result = stage_local(str(src), tmp_path / "chan")
    assert sorted(result.copied) == ["a.txt", "new.txt"] and len(copies) == 2
    assert result.skipped == ["sub/b.bin"]
    (src / "new.txt").unlink()
    (src / "sub" / "b.bin").unlink()
    result = stage_local(str(src), tmp_path / "chan")
    assert sorted(result.deleted) == ["new.txt", "sub/b.bin"]
    assert not (tmp_path / "chan" / "new.txt").exists() and not (tmp_path / "chan" / "sub").exists()


def test_s3_source_is_incremental(tmp_path: Path) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="bkt")
        s3.put_object(Bucket="bkt", Key="ds/x/1.txt", Body=b"one")
        s3.put_object(Bucket="bkt", Key="ds/2.txt", Body=b"two")
        s3.put_object(Bucket="bkt", Key="other/3.txt", Body=b"no")
        stores = Stores(StoreOptions(aws_conn_id=None, s3_client=s3))
        first = stage_local("s3://bkt/ds", tmp_path / "chan", stores=stores)
        assert sorted(first.copied) == ["2.txt", "x/1.txt"]
        second = stage_local("s3://bkt/ds/", tmp_path / "chan", stores=stores)
        assert second.copied == [] and len(second.skipped) == 2
        assert (tmp_path / "chan" / "x" / "1.txt").read_bytes() == b"one"


def test_missing_source_and_nested_destination(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        stage_local(str(tmp_path / "nope"), tmp_path / "chan")
    (tmp_path / "src").mkdir()
    with pytest.raises(ValueError, match="must not be inside the source"):
        stage_local(str(tmp_path / "src"), tmp_path / "src" / "chan")


def test_local_stage_operator_returns_fsx_channel(tmp_path: Path) -> None:
    _tree(tmp_path / "src")
    op = LocalStageOperator(
        task_id="stage",
        source=str(tmp_path / "src"),
        channel_dir=str(tmp_path / "chan"),
        file_system_id="fs-0123456789abcdef0",
        file_system_path="/datasets/train",
    )
    channel = op.execute({})
    assert channel == {
        "type": "fsx",
        "file_system_id": "fs-0123456789abcdef0",
        "directory_path": "/local/datasets/train",
        "access_mode": "ro",
        "local_source": str(tmp_path / "chan"),
    }
    FSxChannel.model_validate(channel)
