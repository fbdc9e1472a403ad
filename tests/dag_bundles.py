"""Running a test's own DAG files with ``dag.test()``: its folder as the DAG bundle, fast polling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def serve_dags_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``folder`` the DAG bundle: ``dag.test()`` serializes the DAGs of the configured bundle, and
    the test's DAG (a pipeline copy with the endpoint's ids) must be the one it finds there."""
    bundle = {
        "name": "dags-folder",
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
        "kwargs": {"path": str(folder), "refresh_interval": 0},
    }
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([bundle]))


def fast_polling(dag: Any, seconds: float = 1.0) -> Any:
    """Poll the endpoint every ``seconds`` instead of the operators' 30 s (the jobs are tiny)."""
    for task in dag.tasks:
        if hasattr(task, "poll_interval"):
            task.poll_interval = seconds
        if hasattr(task, "job_wait_seconds"):  # dag.test has no scheduler to race (the stall watcher)
            task.job_wait_seconds = seconds
    return dag
