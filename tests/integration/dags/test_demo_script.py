"""The README's main command, run twice: run 1 trains and registers, run 2 is skipped saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_dist_training.local import job_env
from tests.paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("demo-script")]


def _run_demo(tmp_path: Path, conf: str) -> subprocess.CompletedProcess[str]:
    # as a user runs it: no AIRFLOW_* of the suite, and the default job Python (tests/conftest.py)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        ADT_DEMO_DIR=str(tmp_path / "demo"),
        ADT_SKIP_SETUP="1",  # this checkout's venv is set up already
        ADT_VENV=sys.prefix,  # the Airflow under test: .venv, or .venv-low (scripts/test-low.sh)
        ADT_DEMO_CONF=conf,
    )
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=900
    )


def _demo(tmp_path: Path) -> str:
    done = _run_demo(tmp_path, '{"backend": "local", "epochs": 2}')  # 2 epochs: keep the test cheap
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _job_python_line(tmp_path: Path) -> str:
    log = (tmp_path / "demo" / "last-run.log").read_text()
    return next(line for line in log.splitlines() if "[local] job Python: " in line)


def test_demo_twice_trains_then_skips_with_the_reason(tmp_path):
    first = _demo(tmp_path)
    assert "Quality gate        PASSED" in first
    assert "Registered          adt-demo/1 (Approved)" in first
    assert "Why trained         no champion yet: training (data fingerprint " in first
    # the job ran in the default job environment (scripts/setup.sh built it), as on an AWS image
    built = job_env.default_env_dir() / "bin" / "python"
    assert f"{built} (the pytorch job environment" in _job_python_line(tmp_path)

    second = _demo(tmp_path)
    assert "SKIPPED: no new data or code since champion adt-demo/1 (data fingerprint " in second
    assert "Training job        not created (train, evaluate, gate and register skipped)" in second
    index = (tmp_path / "demo" / "registry" / "adt-demo" / "index.json").read_text()
    assert '"version": 2' not in index


def test_a_failed_demo_names_the_task_and_its_error_in_a_few_lines(tmp_path):
    done = _run_demo(tmp_path, '{"backend": "local", "instance_count": 17}')  # refused by the plan task
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "Task local.plan failed, not retried: invalid spec or input: fix it, retrying cannot",
        "  airflow_dist_training.errors.SpecValidationError: trigger form: params.instance_count: 17 is "
        "above this DAG's limit of 16; nothing was launched",
        f"demo failed; full log: {tmp_path / 'demo' / 'last-run.log'}",
    ]
