"""The shipped YAML pipeline with ``registry: {kind: mlflow}`` against a real MLflow server, three runs:
v1 and the ``champion`` alias; skipped citing the champion; new data, gated against v1, v2."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.datasets import make_dataset
from tests.mlflow_server import registry_state
from tests.paths import REPO

PIPELINE = REPO / "dags" / "pipelines" / "demo_mlp_local.yaml"
STUB = "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
SHIPPED_REGISTRY = "registry: {local_dir: ../../.adt-demo/registry-yaml, auto_approve: true}"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("mlflow")]


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id.removeprefix("stage_train_evaluate."): str(ti.state) for ti in run.get_task_instances()}


def test_the_yaml_pipeline_registers_skips_and_retrains_against_mlflow(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path, capfd: Any
) -> None:
    from airflow_dist_training.compat import DagBag

    demo = tmp_path / "demo"
    make_dataset(demo / "source")
    text = PIPELINE.read_text()
    assert SHIPPED_REGISTRY in text
    text = text.replace(SHIPPED_REGISTRY, "registry: {kind: mlflow, model_package_group: yaml-demo, auto_approve: true}")
    text = text.replace("../../.adt-demo", str(demo)).replace("../../", f"{REPO}/")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "demo_mlp_local.yaml").write_text(text)
    (dags / "demo_mlp_local.py").write_text(STUB)
    assert yaml.safe_load(text)["registry"]["kind"] == "mlflow"
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo / "jobs"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    dag = bag.dags["demo_mlp_local_yaml"]

    first = dag.test(run_conf={"epochs": 1})
    assert _states(first)["register"] == "success", _states(first)
    assert registry_state(mlflow_server, "yaml-demo")["aliases"] == {"champion": "1"}
    capfd.readouterr()

    second = dag.test(run_conf={"epochs": 1})
    states = _states(second)
    for task in ("train", "evaluate", "gate", "register"):
        assert states[task] == "skipped", (task, states)
    assert "no new data or code since champion models:/yaml-demo/1 (data fingerprint " in capfd.readouterr().out

    new = make_dataset(tmp_path / "new", seed=7)  # new training data, the same evaluation set
    shutil.copy(new / "train" / "data.csv", demo / "source" / "train" / "data.csv")
    third = dag.test(run_conf={"epochs": 2, "warm_start": "champion"})
    states = _states(third)
    assert states["gate"] == states["register"] == "success", states
    out = capfd.readouterr().out
    assert "data and spec changed since champion models:/yaml-demo/1: training" in out

    state = registry_state(mlflow_server, "yaml-demo")
    assert state["aliases"] == {"champion": "2"} and sorted(state["versions"]) == [1, 2]
    v2 = state["versions"][2]["tags"]
    assert v2["champion_compared_with"] == "models:/yaml-demo/1" and v2["gate_decision"] == "passed"
    assert v2["data_fingerprint"] != state["versions"][1]["tags"]["data_fingerprint"]
