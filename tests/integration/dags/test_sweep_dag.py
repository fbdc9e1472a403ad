"""The shipped sweep DAG with dag.test(): four hyperparameter sets train, the best one is gated and
registered, alone; the others' metrics are in the summary (local backend)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.datasets import make_dataset
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "sweep_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sweep-dag")]


@pytest.fixture
def sweep_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source", train=1000, test=400)
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["sweep_retraining"], tmp_path


def test_a_sweep_of_four_sets_registers_exactly_one_version_the_best(sweep_dag, capfd):
    dag, demo = sweep_dag
    run = dag.test()
    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for index in range(4):
        assert states[("sweep.members.evaluate", index)] == "success", states
    assert states[("sweep.best_of_sweep", -1)] == states[("sweep.register", -1)] == "success"
    best = next(ti for ti in run.get_task_instances() if ti.task_id == "sweep.best_of_sweep")
    selection = best.xcom_pull(task_ids="sweep.best_of_sweep", key="selection")
    members = best.xcom_pull(task_ids="sweep.best_of_sweep", key="members")
    accuracies = {m["member"]: m["metrics"]["accuracy"] for m in members}
    assert sorted(accuracies) == ["trial-00", "trial-01", "trial-02", "trial-03"]
    assert selection["winner"] == max(accuracies, key=lambda m: accuracies[m])
    # exactly one version: the winner's job
    [version] = json.loads((demo / "registry" / "sweep-mlp" / "index.json").read_text())["versions"]
    training = best.xcom_pull(task_ids="sweep.best_of_sweep", key="training")
    assert version["training_job_name"] == training["job_name"]
    assert version["training_job_name"].startswith(f"sweep-mlp-{selection['winner']}-")
    summary = (demo / "last-sweep-summary.txt").read_text()
    for member, accuracy in accuracies.items():
        assert member in summary and f"accuracy={accuracy:.4g}" in summary
    assert f"WINNER {selection['winner']}" in summary
    assert "Registered          sweep-mlp/1 (Approved)" in summary
