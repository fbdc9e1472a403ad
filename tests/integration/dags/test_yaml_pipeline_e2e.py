"""The shipped demo YAML pipeline (dags/pipelines/demo_mlp_local.yaml) runs end to end with dag.test().

The file is copied unchanged into a scratch tree shaped like the repository
(``tests/dag_bundles.shipped_pipeline_copy``), so its relative paths resolve exactly as they do in
the repository, and its data lands in the scratch tree's ``.adt-demo``, outside the DAGs folder.
"""

from __future__ import annotations

import pytest

from tests.dag_bundles import shipped_pipeline_copy
from tests.datasets import make_dataset

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("yaml-pipeline-dag")]


def test_demo_yaml_pipeline_trains_gates_and_registers(tmp_path, monkeypatch, airflow_db, capfd, caplog):
    from airflow_dist_training.local import job_env

    # the package is linked for the shipped helper the job's source depends on
    root, dag = shipped_pipeline_copy(
        tmp_path, "demo_mlp_local", monkeypatch, links=("examples", "airflow_dist_training")
    )
    make_dataset(root / ".adt-demo" / "source")
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
    dags = root / "dags" / "pipelines"
    assert sorted(p.name for p in dags.iterdir() if not p.name.startswith("__")) == [
        "demo_mlp_local.py",
        "demo_mlp_local.yaml",
    ]
