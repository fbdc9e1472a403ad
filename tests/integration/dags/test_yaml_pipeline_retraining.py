"""The shipped YAML pipeline, three runs against one registry: run 1 trains, run 2 is skipped saying why,
run 3 (new data) trains all its epochs from scratch and is compared with v1."""

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


def test_yaml_pipeline_trains_skips_the_unchanged_rerun_and_retrains_on_new_data(yaml_dag, capfd):
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
    assert "epoch=0 loss=" not in out
    assert len(json.loads((demo / "registry-yaml" / "local-demo" / "index.json").read_text())["versions"]) == 1

    # Run 3: new data arrives (the generator with another seed): all epochs, from scratch, vs v1.
    make_dataset(demo / "source", seed=7)
    third = dag.test(run_conf={"epochs": 2})
    states = {ti.task_id: str(ti.state) for ti in third.get_task_instances()}
    assert states["stage_train_evaluate.train"] == "success", states
    out = capfd.readouterr().out
    assert "data and evaluation changed since champion local-demo/1: training" in out  # both regenerated
    assert "no checkpoint found: starting from scratch" in out
    assert "epoch=0 loss=" in out and "epoch=1 loss=" in out
    assert "run_summary epochs_trained=2 " in out
    versions = json.loads((demo / "registry-yaml" / "local-demo" / "index.json").read_text())["versions"]
    if states["stage_train_evaluate.register"] == "success":
        assert [v["version"] for v in versions] == [1, 2]
        assert versions[1]["lineage"]["champion_compared_with"] == "local-demo/1"
        assert versions[1]["lineage"]["data_fingerprint"] != v1["lineage"]["data_fingerprint"]
    else:  # rejected by the gate against v1, with the reason; nothing registered
        assert len(versions) == 1 and "vs champion local-demo/1" in out, states
