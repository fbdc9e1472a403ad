"""The shipped YAML pipeline with `for_each`: three members in one run, twice; run 2 retrains only the
member whose data changed (local backend, dag.test())."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.datasets import make_dataset
from tests.paths import REPO

PIPELINE = REPO / "dags" / "pipelines" / "markets_local.yaml"
STUB = "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
MEMBERS = ("emea", "apac", "amer")

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("yaml-retraining")]


@pytest.fixture
def yaml_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow_dist_training.compat import DagBag

    demo = tmp_path / "demo"
    for seed, member in enumerate(MEMBERS):
        make_dataset(demo / "markets" / member, train=1000, test=64, seed=seed)
    make_dataset(demo / "markets" / "holdout", train=64, test=400, seed=99)
    text = PIPELINE.read_text().replace("../../.adt-demo", str(demo)).replace("../../", f"{REPO}/")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "markets_local.yaml").write_text(text)
    (dags / "markets_local.py").write_text(STUB)
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo / "jobs"))
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["markets_local_yaml"], demo


def _versions(demo: Path, member: str) -> list[dict[str, Any]]:
    index = demo / "registry-markets" / f"local-markets-{member}" / "index.json"
    return json.loads(index.read_text())["versions"] if index.exists() else []


def test_for_each_trains_every_member_then_only_the_member_whose_data_changed(yaml_dag, capfd):
    dag, demo = yaml_dag
    first = dag.test()
    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in first.get_task_instances()}
    assert str(first.state) == "success", states
    for index, member in enumerate(MEMBERS):
        assert states[("stage_train_evaluate.register", index)] == "success", (member, states)
        [version] = _versions(demo, member)
        assert version["training_job_name"].startswith(f"local-markets-{member}-")
    capfd.readouterr()

    make_dataset(demo / "markets" / "emea", train=1000, test=64, seed=11)
    second = dag.test()
    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in second.get_task_instances()}
    assert str(second.state) == "success", states
    for index, member in enumerate(MEMBERS):
        expected = "success" if member == "emea" else "skipped"
        for task in ("train", "evaluate", "gate", "register"):
            assert states[(f"stage_train_evaluate.{task}", index)] == expected, (member, task, states)
    out = capfd.readouterr().out
    assert "data changed since champion local-markets-emea/1: training" in out
    assert "no new data or code since champion local-markets-apac/1" in out
    assert "no new data or code since champion local-markets-amer/1" in out
    assert len(_versions(demo, "apac")) == len(_versions(demo, "amer")) == 1


def test_one_member_failing_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
):
    """apac's script fails at its first epoch: its train fails (no retry: a script failure), emea and
    amer train, evaluate and register; the run is failed, naming the member's task."""
    from airflow_dist_training.compat import DagBag

    demo = tmp_path / "demo"
    for seed, member in enumerate(MEMBERS):
        make_dataset(demo / "markets" / member, train=500, test=64, seed=seed)
    make_dataset(demo / "markets" / "holdout", train=64, test=400, seed=99)
    text = PIPELINE.read_text().replace("../../.adt-demo", str(demo)).replace("../../", f"{REPO}/")
    text = text.replace("hyperparameters: {lr: 0.1}", "hyperparameters: {lr: 0.1, fail-at-epoch: 0}")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "markets_local.yaml").write_text(text)
    (dags / "markets_local.py").write_text(STUB)
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo / "jobs"))
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    run = bag.dags["markets_local_yaml"].test()
    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "failed"
    apac = MEMBERS.index("apac")
    assert states[("stage_train_evaluate.train", apac)] == "failed", states
    assert states[("stage_train_evaluate.register", apac)] == "upstream_failed", states
    for index, member in enumerate(MEMBERS):
        if member != "apac":
            assert states[("stage_train_evaluate.register", index)] == "success", (member, states)
            assert len(_versions(demo, member)) == 1
    assert _versions(demo, "apac") == []
