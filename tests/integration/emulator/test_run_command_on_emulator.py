"""``airflow-dist-training run --backend sagemaker`` against the emulator returns within 5 s of the
job's end (the SageMaker SDK's ``wait()`` polls every 5 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import BUCKET

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NOTICE_SECONDS = 5.0
SLACK_SECONDS = 1.0  # the command's last describe, its printing and the process exit on a busy box
SPEC = """\
name: emu-cli-run
role_arn: arn:aws:iam::123456789012:role/SageMakerTrainingRole
image: {{framework: pytorch, framework_version: "2.8.0", py_version: py312}}
source: {{entry_point: train.py, source_dir: {code}}}
compute: {{instance_type: ml.m5.xlarge, instance_count: 1}}
output: {{s3_path: "s3://{bucket}/models"}}
stopping: {{max_runtime_seconds: 300}}
"""


def test_run_notices_the_jobs_end_within_5_seconds(sagemaker_endpoint: Any, tmp_path: Path) -> None:
    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("import time\nprint('training', flush=True)\ntime.sleep(3)\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(code=code, bucket=BUCKET))
    name = "emu-cli-run-notice"
    sm = sagemaker_endpoint.client("sagemaker")
    ended: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:  # when the job is terminal on the endpoint, seen every 0.1 s
        while not stop.is_set():
            try:
                status = sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"]
            except sm.exceptions.ClientError:
                status = None  # not created yet
            if status in ("Completed", "Failed", "Stopped"):
                ended["at"] = time.monotonic()
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "airflow_dist_training.cli", "run", str(spec)),
                *("--backend", "sagemaker", "--region", "us-east-1", "--job-name", name),
            ],
            env=dict(os.environ),  # AWS_ENDPOINT_URL: the emulator
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        noticed = None
        for line in proc.stdout:  # when the command says the job ended (not when the process exits)
            if line.startswith(f"Training job {name} Completed"):
                noticed = time.monotonic()
        returncode = proc.wait(timeout=300)
    finally:
        stop.set()
        watcher.join(5)
    assert returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert noticed is not None, "the command never said the job Completed"
    delay = noticed - ended["at"]
    print(f"run noticed the end {delay:.2f} s after the job ended on the endpoint")
    assert delay < NOTICE_SECONDS + SLACK_SECONDS, delay
