"""An out-of-range trigger value fails the plan task; nothing launches (no clamping into a run)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.paths import REPO

pytestmark = [pytest.mark.xdist_group("retraining-dag")]


def test_instance_count_above_the_limit_fails_the_plan_and_launches_nothing(airflow_db: Any, tmp_path, monkeypatch):
    from airflow_dist_training.compat import DagBag

    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    dag = DagBag(dag_folder=str(REPO / "dags" / "distributed_retraining.py"), safe_mode=False).dags[
        "distributed_retraining"
    ]
    run = dag.test(run_conf={"backend": "local", "instance_count": 20})
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["local.plan"] == "failed", states
    assert states["local.train"] in ("upstream_failed", "skipped"), states
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())


def test_an_evaluation_dependency_outside_the_project_fails_the_plan_and_launches_nothing(
    airflow_db: Any, tmp_path, monkeypatch, capfd, caplog
):
    """The form chooses what the evaluation ships, among the project's files only: a path that
    leaves the project (here the worker's /etc/passwd) would be uploaded to S3 and into a job."""
    from airflow_dist_training.compat import DagBag

    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    dag = DagBag(dag_folder=str(REPO / "dags" / "distributed_retraining.py"), safe_mode=False).dags[
        "distributed_retraining"
    ]
    conf = {"backend": "local", "evaluation_dependencies": ["airflow_dist_training/checkpointing.py", "../../etc/passwd"]}
    run = dag.test(run_conf=conf)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["local.plan"] == "failed", states
    assert states["local.train"] in ("upstream_failed", "skipped"), states
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())
    captured = capfd.readouterr()
    log = captured.out + captured.err + caplog.text
    assert (
        "trigger form: params.evaluation_dependencies[1]: '../../etc/passwd' must be a path inside the "
        f"project folder {REPO}"
    ) in log
