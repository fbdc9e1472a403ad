"""The local backend with S3 stores on the moto server: code download, S3 channel, checkpoint sync, model
upload; S3 reached through the task's connection (its ``endpoint_url``), not boto3's default chain."""

from __future__ import annotations

import io
import json
import os
import tarfile
import textwrap
from collections.abc import Iterator
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


READS_ITS_CHANNEL = textwrap.dedent(
    """
    import os, pathlib
    rows = (pathlib.Path(os.environ["SM_CHANNEL_TRAIN"]) / "part-0.csv").read_text().splitlines()
    print(f"read {len(rows)} rows, first {rows[0]}", flush=True)
    """
)


@pytest.fixture
def team_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A team's S3, reachable only through its connection's ``endpoint_url``: a moto server on a port
    no variable names, while ``AWS_ENDPOINT_URL`` (boto3's default chain) names a port where nothing
    listens (moto servers in one process share their buckets, so it cannot be another moto)."""
    import boto3
    from moto.server import ThreadedMotoServer

    from tests.conftest import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("ADT_LOCAL_USE_S3", raising=False)
    conn = {"conn_type": "aws", "login": "team", "password": "team-secret"}
    conn["extra"] = {"endpoint_url": endpoint, "region_name": "us-east-1"}  # type: ignore[assignment]
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_S3", json.dumps(conn))
    client = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint)
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key="data/train/part-0.csv", Body=b"a,1\nb,2\nc,3\n")
    try:
        yield client
    finally:
        server.stop()


def _team_job(tmp_path: Path, **spec: Any) -> dict[str, Any]:
    """A local job reading its channel through the ``team_s3`` connection; its result."""
    from airflow_dist_training.operators.training import DistributedTrainingOperator

    from .conftest import script_spec

    op = DistributedTrainingOperator(
        task_id="train",
        spec=script_spec(
            tmp_path,
            READS_ITS_CHANNEL,
            distribution={"strategy": "none"},
            channels={"train": {"type": "s3", "uri": f"s3://{BUCKET}/data/train/"}},
            **spec,
        ),
        backend="local",
        aws_conn_id="team_s3",
        local_hook_kwargs={"root": str(tmp_path / "jobs"), "stop_grace_seconds": 5},
    )
    return dict(op.execute({"ti": None, "run_id": "manual__1"}))


def test_a_local_job_reads_its_s3_channel_through_the_tasks_connection(
    team_s3: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    result = _team_job(tmp_path, output={"s3_path": f"s3://{BUCKET}/output"})
    assert result["status"] == "Completed"
    assert "read 3 rows, first a,1" in capfd.readouterr().out
    # the code went up and the model came back through the same connection
    job = result["job_name"]
    assert result["model_artifact_uri"] == f"s3://{BUCKET}/output/{job}/output/model.tar.gz"
    keys = {o["Key"] for o in team_s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert f"output/{job}/output/model.tar.gz" in keys


def test_a_local_job_without_output_keeps_its_stand_in_bucket_local(
    team_s3: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """With S3 credentials, a spec without ``output`` used to send its code to the stand-in bucket
    ``s3://adt-local`` on the connection's S3, and fail with NoSuchBucket."""
    result = _team_job(tmp_path)
    assert result["status"] == "Completed"
    assert "read 3 rows, first a,1" in capfd.readouterr().out  # the channel still came through S3
    job = result["job_name"]
    assert (tmp_path / "jobs" / "_s3" / "adt-local" / job / "source" / "sourcedir.tar.gz").is_file()
    assert "adt-local" not in {b["Name"] for b in team_s3.list_buckets()["Buckets"]}


def test_local_staging_reads_an_s3_source_through_the_tasks_connection(team_s3: Any, tmp_path: Path) -> None:
    from airflow_dist_training.operators.fsx import LocalStageOperator

    op = LocalStageOperator(
        task_id="stage",
        source=f"s3://{BUCKET}/data/",
        channel_dir=str(tmp_path / "chan"),
        aws_conn_id="team_s3",
    )
    assert op.execute({})["local_source"] == str(tmp_path / "chan")
    assert (tmp_path / "chan" / "train" / "part-0.csv").read_bytes() == b"a,1\nb,2\nc,3\n"
