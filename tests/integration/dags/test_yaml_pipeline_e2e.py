"""The shipped demo YAML pipeline (dags/pipelines/demo_mlp_local.yaml) runs end to end with dag.test().

The file is copied unchanged into a scratch tree shaped like the repository (``dags/pipelines/``,
``examples`` linked), so its relative paths resolve exactly as they do in the repository, and its
data lands in the scratch tree's ``.adt-demo``, outside the DAGs folder.
"""

from __future__ import annotations

import shutil

import pytest

from tests.datasets import make_dataset
from tests.paths import REPO

PIPELINES = REPO / "dags" / "pipelines"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("yaml-pipeline-dag")]


def test_demo_yaml_pipeline_trains_gates_and_registers(tmp_path, monkeypatch, airflow_db, capfd, caplog):
    from airflow_dist_training.compat import DagBag
    from airflow_dist_training.local import job_env

    root = tmp_path / "repo"
    dags = root / "dags" / "pipelines"
    dags.mkdir(parents=True)
    for name in ("demo_mlp_local.yaml", "demo_mlp_local.py"):
        shutil.copy(PIPELINES / name, dags / name)
    (root / "examples").symlink_to(REPO / "examples")
    (root / "airflow_dist_training").symlink_to(REPO / "airflow_dist_training")  # the shipped helper
    make_dataset(root / ".adt-demo" / "source")
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    dag = bag.dags["demo_mlp_local_yaml"]
    run = dag.test(run_conf={"epochs": 4})
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in ("stage", "train", "evaluate", "gate", "register"):
        assert states[f"stage_train_evaluate.{task}"] == "success", states
    # training and evaluation ran in what the image has: the job environment, nothing of the provider
    captured, python = capfd.readouterr(), job_env.default_env_dir() / "bin" / "python"
    out = captured.out + captured.err + caplog.text  # the task log, wherever pytest captured it
    assert f"[local] job Python: {python} (the pytorch job environment" in out
    assert f"Evaluation Python: {python} (the pytorch job environment" in out
    # the data went where the spec's paths point, next to the repository, not into the DAGs folder
    assert (root / ".adt-demo" / "yaml" / "data" / "train").is_dir()
    assert any((root / ".adt-demo" / "registry-yaml").iterdir())
    assert sorted(p.name for p in dags.iterdir() if not p.name.startswith("__")) == [
        "demo_mlp_local.py",
        "demo_mlp_local.yaml",
    ]
