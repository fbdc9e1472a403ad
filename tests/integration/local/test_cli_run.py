"""`airflow-dist-training run SPEC.yaml`: one job without Airflow; exit code and reason like a user sees them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow


def write_spec(tmp_path: Path, script: str) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(script)
    spec = {
        "name": "cli-run",
        "image": {"framework": "pytorch", "framework_version": "2.8.0"},
        "source": {"entry_point": "train.py", "source_dir": "code"},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 2},
        "distribution": {"strategy": "none"},
        "stopping": {"max_runtime_seconds": 300},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow_dist_training.cli",
            "run",
            *args,
            "--jobs-root",
            str(tmp_path / "jobs"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "ADT_LOCAL_USE_S3": "0"},
        timeout=600,
    )


def test_run_completes_streams_logs_and_names_the_job_folder(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "import socket\nprint('hello from', socket.gethostname(), flush=True)\n")
    out = cli(tmp_path, str(spec), "--job-name", "cli-ok", "--follow")
    assert out.returncode == 0, out.stderr
    assert "[algo-2] hello from" in out.stdout
    assert "Training job cli-ok Completed" in out.stdout
    job = tmp_path / "jobs" / "cli-ok"
    assert f"  job folder:     {job}\n" in out.stdout  # each simulated host's /opt/ml folders under it
    assert (job / "model").is_dir() and (job / "hosts" / "algo-2" / "model").is_dir()


def test_run_exits_non_zero_with_the_failure_reason(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import os, sys
        if os.environ["SM_CURRENT_HOST"] == "algo-2":
            sys.exit("algo-2 cannot find its shard")
        """
    )
    spec = write_spec(tmp_path, script)
    out = cli(tmp_path, str(spec), "--job-name", "cli-fails")
    assert out.returncode == 1
    assert "Training job cli-fails ended Failed: AlgorithmError:" in out.stderr
    assert "failed on host algo-2 (exit code 1)" in out.stderr  # the failing host and its last lines
    assert "  algo-2 cannot find its shard" in out.stderr
    assert "Traceback (most recent call last)" not in out.stderr.split("AlgorithmError:")[0]


def test_run_with_an_invalid_spec_exits_2_before_launching(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "print('never')\n")
    data = yaml.safe_load(spec.read_text())
    data["distribution"] = {"strategy": "smp_v1"}
    spec.write_text(yaml.safe_dump(data))
    out = cli(tmp_path, str(spec), "--job-name", "cli-bad")
    assert out.returncode == 2
    assert out.stderr.startswith(
        "error: local backend: distribution.strategy: smp_v1 cannot run on the local backend"
    )
    assert "Starting training job" not in out.stdout  # refused before anything is said to start
    assert not (tmp_path / "jobs" / "cli-bad").exists()
