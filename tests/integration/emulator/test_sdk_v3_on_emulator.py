"""SageMaker SDK v3's ``ModelTrainer``, unchanged and with its defaults (role validation on: IAM
``SimulatePrincipalPolicy``), against the endpoint: one host, and ``Torchrun()`` on two. The SDK runs
in its own throwaway venv beside the parity one (``$ADT_PARITY_CACHE/sdk3-venv``); asserted is what
it reports (status, ``model.tar.gz``) and the log lines ``train()`` streamed from CloudWatch.

Run with ``ADT_SDK3_TESTS=1``: building the SDK v3 venv takes over 5 minutes, which CI cannot spend.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.parity.conftest import CACHE, _locked

from .test_sdk_v2_on_emulator import TRAIN

pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group("sagemaker-emulator"),
    # its venv alone takes over 5 minutes to resolve and install: beyond CI's 45-minute budget
    pytest.mark.skipif(os.environ.get("ADT_SDK3_TESTS") != "1", reason="SDK v3 client run: set ADT_SDK3_TESTS=1"),
]
SDK3_VERSION = "3.27.0"
VENV = CACHE / "sdk3-venv"
BUCKET = "sdk-v3"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312"
# the SDK's telemetry calls a real AWS host, and its default bucket asks the regional STS endpoint
# (not AWS_ENDPOINT_URL) for the account: both set in the SDK's own config file, as a user would
SDK_CONFIG = f"""\
SchemaVersion: '1.0'
SageMaker:
  PythonSDK:
    Modules:
      TelemetryOptOut: true
      Session:
        DefaultS3Bucket: {BUCKET}
"""


def ensure_sdk3_venv() -> Path:
    """Create (or reuse) the SDK v3 venv; a current pip (an old one backtracks for many minutes)."""
    python = VENV / "bin" / "python"
    with _locked("sdk3-venv"):
        check = [str(python), "-c", "import importlib.metadata as m; print(m.version('sagemaker'))"]
        if (
            python.exists()
            and subprocess.run(check, capture_output=True, text=True).stdout.strip() == SDK3_VERSION
        ):
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-U", "pip"], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", f"sagemaker=={SDK3_VERSION}"], check=True
        )
        return python


def test_sdk_v3_model_trainer_runs_unchanged(sagemaker_endpoint: Any, tmp_path: Path) -> None:
    python = ensure_sdk3_venv()
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
        "image": IMAGE,
        "runs": [
            {"name": "v3-one", "instance_count": 1, "torchrun": False},
            {"name": "v3-two", "instance_count": 2, "torchrun": True},
        ],
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "sdk-config.yaml").write_text(SDK_CONFIG)
    env = {
        **os.environ,
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(tmp_path / "sdk-config.yaml"),
        "PYTHONPATH": "",
    }
    env.pop("SAGEMAKER_VALIDATE_ROLE", None)  # the SDK's default: validate
    proc = subprocess.run(
        [
            str(python),
            str(Path(__file__).with_name("sdk_v3_model_trainer.py")),
            str(tmp_path / "config.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    results = {
        r["name"]: r
        for r in (
            json.loads(line.split(" ", 1)[1])
            for line in proc.stdout.splitlines()
            if line.startswith("SDK-RESULT ")
        )
    }
    for name, world in (("v3-one", 1), ("v3-two", 2)):
        result = results[name]
        assert result["status"] == "Completed"
        key = result["model_data"].split(f"s3://{BUCKET}/", 1)[1]
        with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())) as tar:
            member = tar.extractfile("model.txt")
            assert member is not None and member.read() == f"world={world}".encode()
        total = sum(range(1, world + 1))
        for rank in range(world):  # streamed by train(logs=True): every rank's line
            assert f"sdk-v2 rank={rank} world={world} epoch=1 rows=3 sum={total} loss=0.25" in output
