"""The shipped YAML pipeline, two runs against one registry: run 1 trains, run 2 is skipped saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.datasets import make_dataset
from tests.paths import REPO

PIPELINE = REPO / "dags" / "pipelines" / "demo_mlp_local.yaml"
STUB = "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("yaml-retraining")]


@pytest.fixture
def yaml_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow_dist_training.compat import DagBag

    demo = tmp_path / "demo"
    make_dataset(demo / "source")
    # The referenced spec's paths are relative to the working directory (the repository root):
    # make them absolute, as dags/distributed_retraining.py does.
    spec = yaml.safe_load((REPO / "examples" / "specs" / "local_demo.yaml").read_text())
    spec["source"]["source_dir"] = str(REPO / "examples")
    spec["channels"]["train"]["local_source"] = str(demo / "data" / "train")
    spec["checkpoint"]["local_uri"] = str(demo / "checkpoints" / "local-demo")
    spec["output"]["local_uri"] = str(demo / "models")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    text = PIPELINE.read_text().replace("../../examples/specs/local_demo.yaml", str(tmp_path / "spec.yaml"))
    text = text.replace("../../.adt-demo", str(demo)).replace("../../", f"{REPO}/")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "demo_mlp_local.yaml").write_text(text)
    (dags / "demo_mlp_local.py").write_text(STUB)
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo / "jobs"))
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["demo_mlp_local_yaml"], demo


def test_yaml_pipeline_trains_then_skips_the_unchanged_rerun(yaml_dag, capfd):
    dag, demo = yaml_dag
    first = dag.test(run_conf={"epochs": 2})
    states = {ti.task_id: str(ti.state) for ti in first.get_task_instances()}
    assert states["stage_train_evaluate.register"] == "success", states
    index = json.loads((demo / "registry-yaml" / "local-demo" / "index.json").read_text())
    [v1] = index["versions"]
    assert v1["lineage"]["data_fingerprint"].startswith("sha256:")
    capfd.readouterr()

    second = dag.test(run_conf={"epochs": 2})
    states = {ti.task_id: str(ti.state) for ti in second.get_task_instances()}
    assert str(second.state) == "success", states
    for task in ("train", "evaluate", "gate", "register"):
        assert states[f"stage_train_evaluate.{task}"] == "skipped", (task, states)
    out = capfd.readouterr().out
    assert "no new data or code since champion local-demo/1 (data fingerprint " in out
