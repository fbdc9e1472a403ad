"""Running a test's own DAG files with ``dag.test()``: a shipped pipeline's copy, its folder as the
DAG bundle, fast polling."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.paths import REPO


def shipped_pipeline_copy(
    tmp_path: Path, stem: str, monkeypatch: pytest.MonkeyPatch, *, links: tuple[str, ...] = ("examples",)
) -> tuple[Path, Any]:
    """The shipped pipeline ``dags/pipelines/<stem>.yaml`` and its loader copied unchanged into a
    scratch tree shaped like the repository (``<tmp_path>/repo``, the repository's ``links`` linked),
    so its relative paths resolve as they do in the repository; its jobs under ``<tmp_path>/jobs``.

    Returns the scratch repository and the pipeline's DAG, parsed there."""
    from airflow_dist_training.compat import DagBag

    root = tmp_path / "repo"
    dags = root / "dags" / "pipelines"
    dags.mkdir(parents=True)
    for suffix in (".yaml", ".py"):
        shutil.copy(REPO / "dags" / "pipelines" / f"{stem}{suffix}", dags)
    for name in links:
        (root / name).symlink_to(REPO / name)
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    return root, bag.dags[f"{stem}_yaml"]


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
