"""The SageMaker SDK v2 ``PyTorch`` estimator, unchanged, against the endpoint: one instance, and two
with ``torch_distributed`` (torchrun across two hosts). The SDK runs in its own throwaway venv (the
parity tests' one, ``$ADT_PARITY_CACHE``); asserted is what the SDK reports: the job's status, its
metrics, ``model_data`` (whose ``model.tar.gz`` holds what each script saved) and the log lines
``fit(logs="All")`` streamed from CloudWatch.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.parity.conftest import ensure_sdk_venv

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("sagemaker-emulator")]
BUCKET = "sdk-v2"
TRAIN = """\
import argparse, os
import torch
import torch.distributed as dist
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int)
args = parser.parse_args()
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    dist.init_process_group("gloo")
rank = dist.get_rank() if world > 1 else 0
total = torch.tensor([float(rank + 1)])
if world > 1:
    dist.all_reduce(total)
rows = open(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "a.csv")).read().split()
for epoch in range(args.epochs):
    print(f"sdk-v2 rank={rank} world={world} epoch={epoch} rows={len(rows)} sum={total.item():.0f} loss={0.5 / (epoch + 1)}", flush=True)
if rank == 0:
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write(f"world={world}")
if world > 1:
    dist.destroy_process_group()
"""


def test_the_sdk_v2_pytorch_estimator_runs_unchanged(sagemaker_endpoint: Any, tmp_path: Path) -> None:
    python = ensure_sdk_venv()
    s3 = sagemaker_endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="data/a.csv", Body=b"1\n2\n3\n")
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(TRAIN)
    config = {
        "source_dir": str(source),
        "bucket": BUCKET,
        "role": "arn:aws:iam::123456789012:role/SageMakerRole",
        "runs": [
            {"name": "sdk-one", "instance_count": 1, "instance_type": "ml.m5.xlarge", "distribution": None},
            {  # the SDK allows torch_distributed on GPU and Trainium instances only (here: CPU processes)
                "name": "sdk-two",
                "instance_count": 2,
                "instance_type": "ml.g5.xlarge",
                "distribution": {"torch_distributed": {"enabled": True}},
            },
        ],
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    # the SDK's telemetry calls a real AWS host: opted out through the SDK's own config file
    (tmp_path / "sdk-config.yaml").write_text(
        "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"
    )
    env = {
        **os.environ,
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(tmp_path / "sdk-config.yaml"),
        "PYTHONPATH": "",
    }
    proc = subprocess.run(
        [str(python), str(Path(__file__).with_name("sdk_v2_estimator.py")), str(tmp_path / "config.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = {
        r["name"]: r
        for r in (
            json.loads(line.split(" ", 1)[1])
            for line in proc.stdout.splitlines()
            if line.startswith("SDK-RESULT ")
        )
    }
    assert set(results) == {"sdk-one", "sdk-two"}, proc.stdout[-4000:]
    for name, world in (("sdk-one", 1), ("sdk-two", 2)):
        result = results[name]
        assert result["status"] == "Completed"
        assert result["metrics"]["train:loss"] == pytest.approx(0.25)
        key = result["model_data"].split(f"s3://{BUCKET}/", 1)[1]
        with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())) as tar:
            member = tar.extractfile("model.txt")
            assert member is not None and member.read() == f"world={world}".encode()
        # the lines fit(logs="All") streamed: every rank's, with the all-reduce across the hosts
        total = sum(range(1, world + 1))
        for rank in range(world):
            assert f"sdk-v2 rank={rank} world={world} epoch=1 rows=3 sum={total} loss=0.25" in proc.stdout
