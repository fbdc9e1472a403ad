"""The local backend with S3 stores on the moto server: code download, S3 channel, checkpoint sync, model upload."""

from __future__ import annotations

import io
import os
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.hooks.local_training import LocalTrainingHook

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BUCKET = "adt-local-s3"

SCRIPT = textwrap.dedent(
    """
    import os, pathlib
    ckpt = pathlib.Path(os.environ["SM_CHECKPOINT_DIR"]) / "state.txt"
    epoch = int(ckpt.read_text()) if ckpt.exists() else 0
    print(f"resumed from epoch {epoch}" if epoch else "fresh start", flush=True)
    rows = (pathlib.Path(os.environ["SM_CHANNEL_TRAIN"]) / "part-0.csv").read_text().splitlines()
    ckpt.write_text(str(epoch + 1))
    pathlib.Path(os.environ["SM_MODEL_DIR"], "model.txt").write_text(f"epoch={epoch + 1} rows={len(rows)}")
    """
)


@pytest.fixture
def s3(moto_reset: str) -> Any:
    import boto3

    client = boto3.client("s3", region_name="us-east-1", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    client.create_bucket(Bucket=BUCKET)
    code = io.BytesIO()
    with tarfile.open(fileobj=code, mode="w:gz") as tar:
        data = SCRIPT.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    client.put_object(Bucket=BUCKET, Key="code/sourcedir.tar.gz", Body=code.getvalue())
    client.put_object(Bucket=BUCKET, Key="data/train/part-0.csv", Body=b"a,1\nb,2\nc,3\n")
    return client


def spec() -> dict[str, Any]:
    return {
        "name": "s3-stores",
        "image": {"framework": "pytorch", "framework_version": "2.8.0"},
        "source": {"entry_point": "train.py", "source_dir": f"s3://{BUCKET}/code/sourcedir.tar.gz"},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": {"strategy": "none"},
        "channels": {"train": {"type": "s3", "uri": f"s3://{BUCKET}/data/train/"}},
        "checkpoint": {"s3_uri": f"s3://{BUCKET}/checkpoints/run-1"},
        "output": {"s3_path": f"s3://{BUCKET}/output"},
    }


def read_model(s3: Any, key: str, name: str = "model.txt") -> str:
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read().decode()


def test_code_data_checkpoints_and_model_go_through_s3(s3: Any, tmp_path: Path) -> None:
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=True, checkpoint_sync_seconds=0.2)
    first: list[str] = []
    result = hook.run_job(spec(), "s3-job-1", log=first.append)
    assert result["status"] == "Completed"
    assert result["model_artifact_uri"] == f"s3://{BUCKET}/output/s3-job-1/output/model.tar.gz"
    assert read_model(s3, "output/s3-job-1/output/model.tar.gz") == "epoch=1 rows=3"
    stored = s3.get_object(Bucket=BUCKET, Key="checkpoints/run-1/state.txt")["Body"].read()
    assert stored == b"1"
    assert any("fresh start" in line for line in first)

    # a second job with the same checkpoint location resumes from what the first one synced to S3
    second: list[str] = []
    hook.run_job(spec(), "s3-job-2", log=second.append)
    assert any("resumed from epoch 1" in line for line in second)
    assert read_model(s3, "output/s3-job-2/output/model.tar.gz") == "epoch=2 rows=3"
    assert s3.get_object(Bucket=BUCKET, Key="checkpoints/run-1/state.txt")["Body"].read() == b"2"


def test_sync_copies_new_and_rewritten_files_once(s3: Any, tmp_path: Path) -> None:
    from airflow_dist_training.local.launcher import sync_dir
    from airflow_dist_training.storage.location import local_location, parse_location

    local, remote = local_location(tmp_path / "ckpt"), parse_location(f"s3://{BUCKET}/sync")
    synced: dict[str, tuple[int, int]] = {}  # what a run remembers between its periodic syncs
    state = tmp_path / "ckpt" / "last.pt"
    state.parent.mkdir()
    state.write_bytes(b"epoch-1")
    assert sync_dir(local, remote, synced) == 1
    assert sync_dir(local, remote, synced) == 0  # unchanged: not uploaded again every sync period
    state.write_bytes(b"epoch-2")  # same size, rewritten within the same second
    assert sync_dir(local, remote, synced) == 1
    assert s3.get_object(Bucket=BUCKET, Key="sync/last.pt")["Body"].read() == b"epoch-2"
    # a new run restores the file, and does not push it back
    restored, memory = local_location(tmp_path / "restored"), {}
    assert sync_dir(remote, restored, memory) == 1
    assert sync_dir(remote, restored, memory) == 0
    assert sync_dir(restored, remote, memory) == 0
    assert sync_dir(restored, remote) == 0  # without a memory: same size, not newer than the object
    assert (tmp_path / "restored" / "last.pt").read_bytes() == b"epoch-2"


RELAYED = textwrap.dedent(
    """
    import os, pathlib, socket, boto3
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    body = s3.get_object(Bucket="adt-local-s3", Key="data/train/part-0.csv")["Body"].read()
    pathlib.Path("/opt/ml/model", socket.gethostname() + ".txt").write_bytes(body)
    """
)


def test_a_job_in_its_own_network_namespace_reaches_the_s3_endpoint_on_loopback(
    s3: Any, tmp_path: Path
) -> None:
    from airflow_dist_training.local.hosts import probe

    if not probe().namespaces:
        pytest.skip(f"no Linux namespaces here: {probe().why}")
    code = io.BytesIO()
    with tarfile.open(fileobj=code, mode="w:gz") as tar:
        data = RELAYED.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    s3.put_object(Bucket=BUCKET, Key="code/relayed.tar.gz", Body=code.getvalue())
    job = {
        **spec(),
        "source": {"entry_point": "train.py", "source_dir": f"s3://{BUCKET}/code/relayed.tar.gz"},
    }
    job.pop("checkpoint")
    hook = LocalTrainingHook(root=tmp_path / "root", use_s3=True)
    lines: list[str] = []
    hook.run_job(job, "relayed-1", log=lines.append)
    assert any("job network namespace ready" in line for line in lines)
    assert read_model(s3, "output/relayed-1/output/model.tar.gz", "algo-1.txt") == "a,1\nb,2\nc,3\n"
