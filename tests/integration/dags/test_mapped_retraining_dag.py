"""The shipped mapped DAG with dag.test(): three members in one run, twice; run 2 retrains only the
member whose data changed (backend param's default, local: jobs in the default job environment;
the other backends' mapped groups are skipped by the branch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.datasets import make_dataset
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "mapped_retraining.py"
MEMBERS = ("emea", "apac", "amer")
_LOCAL_RUN = ("choose_backend", "local", "summary")  # what a backend=local run runs

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    demo = tmp_path_factory.mktemp("mapped-demo")
    for seed, member in enumerate(MEMBERS):
        make_dataset(demo / "markets" / member, train=1000, test=64, seed=seed)
    make_dataset(demo / "markets" / "holdout", train=64, test=400, seed=99)
    return demo


@pytest.fixture
def mapped_dag(demo_dir: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow_dist_training.compat import DagBag

    monkeypatch.setenv("ADT_DEMO_DIR", str(demo_dir))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo_dir / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["mapped_retraining"]


def _states(run: Any) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def _versions(demo_dir: Path, member: str) -> list[dict[str, Any]]:
    index = demo_dir / "registry" / f"market-mlp-{member}" / "index.json"
    return json.loads(index.read_text())["versions"] if index.exists() else []


def test_three_members_train_then_only_the_member_whose_data_changed_retrains(mapped_dag, demo_dir, capfd):
    run1 = mapped_dag.test()
    states = _states(run1)
    assert str(run1.state) == "success", states
    # the run's backend (default local) was chosen: every other backend's group is skipped
    others = {key: state for key, state in states.items() if key[0].split(".")[0] not in _LOCAL_RUN}
    assert others and set(others.values()) == {"skipped"}, others
    for index in range(3):
        for task in ("plan", "check_changes", "train", "evaluate", "gate", "register"):
            assert states[(f"local.{task}", index)] == "success", (task, index, states)
    out = capfd.readouterr().out
    assert "no champion yet: training" in out
    # each member: its own job (name from its map index), its own model package group with one version
    jobs = {}
    for member in MEMBERS:
        [version] = _versions(demo_dir, member)
        jobs[member] = version["training_job_name"]
        assert jobs[member].startswith(f"market-mlp-{member}-"), jobs
        assert version["lineage"]["run_id"] == run1.run_id
    assert len(set(jobs.values())) == 3
    # the members' hyperparameters reached their jobs
    summary = (demo_dir / "last-mapped-run-summary.txt").read_text()
    for member in MEMBERS:
        assert f"Member {member}: retraining run summary" in summary
        assert f"Registered          market-mlp-{member}/1 (Approved)" in summary

    # Run 2: new data for apac only -> apac retrains, emea and amer are skipped as unchanged
    make_dataset(demo_dir / "markets" / "apac", train=1000, test=64, seed=7)
    run2 = mapped_dag.test()
    states = _states(run2)
    assert str(run2.state) == "success", states
    apac = MEMBERS.index("apac")
    for index, member in enumerate(MEMBERS):
        expected = "success" if index == apac else "skipped"
        for task in ("train", "evaluate", "gate", "register"):
            assert states[(f"local.{task}", index)] == expected, (member, task, states)
    out = capfd.readouterr().out
    assert "data changed since champion market-mlp-apac/1: training" in out
    for member in ("emea", "amer"):
        assert f"no new data or code since champion market-mlp-{member}/1" in out
        assert len(_versions(demo_dir, member)) == 1
    summary = (demo_dir / "last-mapped-run-summary.txt").read_text()
    assert "SKIPPED: no new data or code since champion market-mlp-emea/1" in summary
    assert "SKIPPED: no new data or code since champion market-mlp-amer/1" in summary
    assert (
        "Member apac: retraining run summary" in summary
        and "Why trained         data changed since champion market-mlp-apac/1" in summary
    )
    versions = _versions(demo_dir, "apac")
    if "Quality gate        PASSED" in summary:
        assert [v["version"] for v in versions] == [1, 2]
        assert versions[1]["training_job_name"].startswith("market-mlp-apac-")
        assert versions[1]["training_job_name"] != jobs["apac"]
    else:
        assert len(versions) == 1 and "REJECTED" in summary
