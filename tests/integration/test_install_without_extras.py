"""The built wheel, installed WITHOUT extras into a fresh venv with Airflow pinned (constraints.txt),
is what MWAA, Astronomer and the Helm chart get (docs/deploy.md): every operator and trigger imports,
the shipped DAGs parse, and torch, moto and the SageMaker training toolkit are absent.

Runs ``scripts/check-install.sh <this venv> constraints.txt --fresh`` (which also builds the wheel
and checks that pip keeps the pinned Airflow); a few minutes, most of it installing Airflow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_wheel_without_extras_imports_parses_the_dags_and_pulls_no_torch() -> None:
    venv = Path(sys.prefix)
    proc = subprocess.run(
        [
            "bash",
            str(REPO / "scripts" / "check-install.sh"),
            str(venv),
            str(REPO / "constraints.txt"),
            "--fresh",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"\ninstall without extras: {report['install_mb']} MB; the extras add {report['extras_add_mb']} MB "
        f"(largest: {report['extras_largest']})"
    )

    assert report["absent"] == ["torch", "moto", "sagemaker_training"]
    operators = {name.rsplit(".", 1)[1] for name in report["operators"]}
    triggers = {name.rsplit(".", 1)[1] for name in report["triggers"]}
    assert {"DistributedTrainingOperator", "TrainingJobTrigger"} <= operators | triggers
    assert "TrainingJobTrigger" in triggers
    assert {"distributed_retraining", "demo_new_training_data"} <= set(report["dags"])
    assert report["extras_add_mb"] > report["install_mb"] / 2  # torch alone is most of a full install
