"""The ready retraining DAG with dag.test(): local end to end, resume on the second run, dry runs."""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.local import job_env
from tests.datasets import make_dataset
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "distributed_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    demo = tmp_path_factory.mktemp("demo")
    make_dataset(demo / "source")
    return demo


@pytest.fixture
def retraining_dag(demo_dir: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow_dist_training.compat import DagBag

    monkeypatch.setenv("ADT_DEMO_DIR", str(demo_dir))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo_dir / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def _registry(demo_dir: Path) -> list[dict[str, Any]]:
    index = demo_dir / "registry" / "adt-demo" / "index.json"
    return json.loads(index.read_text())["versions"] if index.exists() else []


def _asset_events(run_id: str) -> list[dict[str, Any]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetModel.uri, AssetEvent.extra)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetEvent.source_run_id == run_id)
        ).all()
    return [{"uri": uri, "extra": dict(extra or {})} for uri, extra in rows]


def lineage_of(run: Any) -> dict[str, Any]:
    """The run's ``check_changes`` lineage XCom."""
    [ti] = [ti for ti in run.get_task_instances() if ti.task_id == "local.check_changes"]
    return dict(ti.xcom_pull(task_ids="local.check_changes", key="lineage"))


def _run_roots(demo_dir: Path) -> set[str]:
    root = demo_dir / "checkpoints" / "local-demo"
    return {p.name for p in root.iterdir()} if root.exists() else set()


def test_three_runs_train_skip_unchanged_and_retrain_on_new_data(
    retraining_dag, demo_dir, capfd, caplog, monkeypatch
):
    """The issue's scenario, as separate DAG runs against one persistent registry (local backend)."""
    # Run 1: trains all its epochs, passes the gate, registers v1 with its lineage.
    run1 = retraining_dag.test(run_conf={"backend": "local", "epochs": 2})
    states = _states(run1)
    assert str(run1.state) == "success", states
    assert states["local.check_changes"] == "success"
    assert states["local.train"] == states["local.gate"] == states["local.register"] == "success"
    assert states["sagemaker.plan"] == "skipped"
    out, run1_err = capfd.readouterr()
    assert "no champion yet: training (data fingerprint " in out
    assert "no checkpoint found: starting from scratch" in out
    assert "epoch=0 loss=" in out and "epoch=1 loss=" in out
    assert "run_summary epochs_trained=2 steps_trained=" in out
    # training and evaluation ran in what the image has: the job environment, nothing of the provider
    python = job_env.default_env_dir() / "bin" / "python"
    assert f"[local] job Python: {python} (the pytorch job environment" in out
    assert (
        f"Evaluation Python: {python} (the pytorch job environment" in out + run1_err + caplog.text
    )  # the task log, wherever pytest captured it
    summary = (demo_dir / "last-run-summary.txt").read_text()
    assert "Registered          adt-demo/1 (Approved)" in summary
    [v1] = _registry(demo_dir)
    lineage = v1["lineage"]
    assert lineage["data_fingerprint"].startswith("sha256:")
    assert lineage["code_hash"].startswith("sha256:") and lineage["spec_hash"].startswith("sha256:")
    assert lineage["run_id"] == run1.run_id and lineage["dag_id"] == "distributed_retraining"
    assert lineage["training_job_name"] == v1["training_job_name"]
    assert lineage["champion_compared_with"] is None and lineage["gate_decision"] == "passed"
    audit = json.loads(Path(v1["audit_uri"]).read_text())
    assert audit["lineage"]["data_fingerprint"] == lineage["data_fingerprint"]
    # staging updated the staged-data asset, with the data fingerprint in the event's extra
    [event] = _asset_events(run1.run_id)
    assert event["uri"] == (demo_dir / "data" / "train").resolve().as_uri()
    assert event["extra"]["fingerprint"] == lineage["channels"]["train"]["fingerprint"]
    assert event["extra"]["objects"] == 1
    roots_after_run1 = _run_roots(demo_dir)
    assert len(roots_after_run1) == 1
    promoted = demo_dir / "checkpoints" / "promoted" / "_MANIFEST.json"
    assert promoted.exists()  # the run's best checkpoint, published where later runs can read it

    # Run 2: same data, code and spec -> skipped with the reason; no job, no version, no checkpoint.
    jobs_before = set((demo_dir / "jobs").iterdir())
    run2 = retraining_dag.test(run_conf={"backend": "local", "epochs": 2})
    states = _states(run2)
    assert str(run2.state) == "success", states
    assert states["local.check_changes"] == "success"
    for task in ("local.train", "local.evaluate", "local.gate", "local.register"):
        assert states[task] == "skipped", (task, states)
    out = capfd.readouterr().out
    reason = f"no new data or code since champion adt-demo/1 (data fingerprint {lineage['data_fingerprint'][7:19]})"
    assert reason in out
    assert "epoch=0 loss=" not in out
    summary = (demo_dir / "last-run-summary.txt").read_text()
    assert f"SKIPPED: {reason}" in summary
    assert len(_registry(demo_dir)) == 1
    assert _run_roots(demo_dir) == roots_after_run1
    assert set((demo_dir / "jobs").iterdir()) == jobs_before

    # A new hold-out set alone (same training data, code and spec): the champion is re-evaluated,
    # not retrained, while its model is there. With the model gone, check_changes trains and says why.
    other = make_dataset(demo_dir / "other-hold-out", seed=3)
    (demo_dir / "source" / "test" / "data.csv").write_bytes((other / "test" / "data.csv").read_bytes())
    model = Path(v1["model_data_uri"].removeprefix("file://"))
    upto_check = retraining_dag.partial_subset(task_ids=["local.check_changes"], include_upstream=True)
    model.rename(model.with_name("moved-away"))
    try:
        upto_check.test(run_conf={"backend": "local", "epochs": 2})
    finally:
        model.with_name("moved-away").rename(model)
    out = capfd.readouterr().out
    assert (
        f"evaluation changed since champion adt-demo/1: its model {v1['model_data_uri']} is gone: training"
        in out
    )

    # Run 3: no training job; one evaluation (of v1's model) recorded on v1, no new version, no gate.
    run3 = retraining_dag.test(run_conf={"backend": "local", "epochs": 2})
    states = _states(run3)
    assert str(run3.state) == "success", states
    assert (
        states["local.check_changes"]
        == states["local.reevaluate"]
        == states["local.record_evaluation"]
        == "success"
    )
    for task in (
        "local.train",
        "local.evaluate",
        "local.gate",
        "local.register",
        "local.checkpoint_retention",
    ):
        assert states[task] == "skipped", (task, states)
    out = capfd.readouterr().out
    reason = (
        f"evaluation changed since champion adt-demo/1: re-evaluating adt-demo/1 without retraining "
        f"(its model {v1['model_data_uri']} is still there)"
    )
    assert reason in out
    assert "epoch=0 loss=" not in out
    assert set((demo_dir / "jobs").iterdir()) == jobs_before and _run_roots(demo_dir) == roots_after_run1
    [ti] = [ti for ti in run3.get_task_instances() if ti.task_id == "local.reevaluate"]
    result = ti.xcom_pull(task_ids="local.reevaluate")
    run_folder = Path(result["evaluation_uri"]).parent.parent  # $AIRFLOW_HOME/evaluation/<dag>/<run>
    assert [p.name for p in run_folder.iterdir()] == ["local.reevaluate"]  # the run's one evaluation
    [v1_after] = _registry(demo_dir)  # no new version
    [record] = v1_after["reevaluations"]
    new_fp = lineage_of(run3)["evaluation_fingerprint"]
    assert new_fp != lineage["evaluation_fingerprint"]
    assert v1_after["lineage"]["evaluation_fingerprint"] == record["evaluation_fingerprint"] == new_fp
    assert v1_after["evaluation_set_hash"] == record["evaluation_set_hash"] != v1["evaluation_set_hash"]
    assert v1_after["evaluation_uri"] == record["evaluation_uri"] != v1["evaluation_uri"]
    assert record["previous_evaluation_uri"] == v1["evaluation_uri"] and record["run_id"] == run3.run_id
    stored = json.loads(Path(record["evaluation_uri"]).read_text())
    assert stored["metrics"] == record["metrics"] == result["metrics"] and set(record["metrics"]) >= {
        "accuracy",
        "loss",
    }
    assert v1_after["model_data_uri"] == v1["model_data_uri"] and v1_after["approval_status"] == "Approved"
    summary = (demo_dir / "last-run-summary.txt").read_text()
    assert f"RE-EVALUATED: {reason}" in summary
    assert "Quality gate        not run (the champion is not gated against itself)" in summary
    assert f"Recorded            on adt-demo/1, no new version ({record['evaluation_uri']})" in summary

    # Run 4: the champion now carries the new evaluation: nothing changed, skipped.
    upto_check.test(run_conf={"backend": "local", "epochs": 2})
    out = capfd.readouterr().out
    assert "no new data or code since champion adt-demo/1 (data fingerprint " in out

    # Run 5: new data arrives (the generator with another seed) -> all epochs from scratch, vs v1.
    make_dataset(demo_dir / "source", seed=7)
    # Its first training job is killed at epoch 1; the task's retry resumes from run 5's own checkpoint.
    monkeypatch.setenv("ADT_DEMO_KILL_AT_EPOCH", "1")
    retraining_dag.get_task("local.train").retry_delay = timedelta(seconds=0)
    run5 = retraining_dag.test(run_conf={"backend": "local", "epochs": 2})
    states = _states(run5)
    assert str(run5.state) == "success", states
    assert states["local.train"] == "success" and states["local.gate"] == "success"
    assert states["local.reevaluate"] == "skipped"
    [train_ti] = [ti for ti in run5.get_task_instances() if ti.task_id == "local.train"]
    assert train_ti.try_number == 2
    out = capfd.readouterr().out
    assert "data and evaluation changed since champion adt-demo/1: training" in out  # both regenerated
    assert "No checkpoint of this run under" in out and "no checkpoint found: starting from scratch" in out
    assert "killing this job at epoch=1" in out
    [run5_root] = _run_roots(demo_dir) - roots_after_run1
    [resumed] = [line for line in out.splitlines() if "Resuming from this run's own checkpoint" in line]
    assert f"local-demo/{run5_root}/step-" in resumed  # never run 1's
    assert "resumed from this run's checkpoint step-" in out and "(epoch=0), starting at epoch=1" in out
    assert "epoch=0 loss=" in out and "epoch=1 loss=" in out
    assert "run_summary epochs_trained=2 " in out  # the run's epochs: one per job
    summary = (demo_dir / "last-run-summary.txt").read_text()
    step = re.search(r", step (\d+)\)", resumed)
    assert step is not None, resumed  # the summary names the step the retry's job resumed from
    assert f"Resumed             from step {step.group(1)} after an earlier try of the task" in summary
    assert "vs champion adt-demo/1" in summary
    assert "PASS training: the training job trained 2 epochs" in summary
    assert "PASS model: model artifact differs from champion adt-demo/1's" in summary
    versions = _registry(demo_dir)
    if "Quality gate        PASSED" in summary:
        assert [v["version"] for v in versions] == [1, 2]
        assert versions[1]["lineage"]["champion_compared_with"] == "adt-demo/1"
        assert versions[1]["lineage"]["data_fingerprint"] != lineage["data_fingerprint"]
    else:
        assert len(versions) == 1 and "REJECTED" in summary


def test_force_trains_all_epochs_although_nothing_changed(retraining_dag, demo_dir, capfd):
    """``force: true`` on an unchanged run (the previous test left a champion) trains anyway."""
    if not _registry(demo_dir):
        retraining_dag.test(run_conf={"backend": "local", "epochs": 2})
    capfd.readouterr()
    run = retraining_dag.test(run_conf={"backend": "local", "epochs": 2, "force": True})
    states = _states(run)
    assert states["local.train"] == "success", states
    out = capfd.readouterr().out
    assert "force=true: training anyway (data fingerprint " in out
    assert "epoch=0 loss=" in out and "epoch=1 loss=" in out


def test_warm_start_from_the_champion_trains_all_configured_epochs(retraining_dag, demo_dir, capfd):
    if not _registry(demo_dir):
        retraining_dag.test(run_conf={"backend": "local", "epochs": 2})
    capfd.readouterr()
    run = retraining_dag.test(run_conf={"backend": "local", "epochs": 2, "warm_start": "champion"})
    states = _states(run)
    assert states["local.train"] == "success", states
    out = capfd.readouterr().out
    # warm_start is part of the run's settings; data and evaluation differ too when the previous
    # test's last run was rejected and the champion is an older version
    changed = re.search(r"(\w+(?: and \w+)*) changed since champion adt-demo/\d+: training", out)
    assert changed is not None and "spec" in changed.group(1).split(" and "), out[-2000:]
    assert "Warm start: the champion's model file://" in out or "Warm start: the champion's model /" in out
    assert "warm start: initialised from " in out and "training all 2 epochs" in out
    assert "epoch=0 loss=" in out and "epoch=1 loss=" in out
    assert "run_summary epochs_trained=2 " in out and "warm_started=1" in out

    # warm_start: promoted reads the stable promotion location; the script takes the model out of
    # the promoted checkpoint the same way it takes it out of the champion's model.tar.gz
    from airflow_dist_training.operators.retraining import _promoted_checkpoint

    promoted = demo_dir / "checkpoints" / "promoted"
    assert _promoted_checkpoint(str(promoted), None, None) == str(promoted)
    assert _promoted_checkpoint(str(demo_dir / "checkpoints" / "nothing-here"), None, None) is None
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import torch
        import train
    finally:
        sys.path.remove(str(REPO / "examples"))
    weights = train.warm_start_weights(str(promoted), torch.device("cpu"))
    assert weights is not None and set(weights) == set(train.build_model(8, 32, 4).state_dict())


def test_dry_run_shows_the_plan_and_launches_nothing(retraining_dag, demo_dir, capfd):
    run = retraining_dag.test(run_conf={"backend": "local", "dry_run": True})
    states = _states(run)
    assert states["local.plan"] == "success"
    for task in ("local.stage", "local.train", "local.evaluate", "local.gate", "local.register"):
        assert states[task] == "skipped", (task, states)
    out = capfd.readouterr().out
    # the local plan shows the exact request SageMaker would receive (launcher mode on a CPU instance)
    assert "Hosts            1 simulated host(s): algo-1" in out
    assert "Cost bound       $0 (local)" in out
    assert '"ContainerEntrypoint": [' in out and '"InstanceType": "ml.m5.xlarge"' in out


def test_sagemaker_dry_run_shows_request_cost_and_warnings_without_aws(retraining_dag, capfd, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # any AWS call would fail loudly
    run = retraining_dag.test(
        run_conf={
            "backend": "sagemaker",
            "dry_run": True,
            "instance_type": "ml.p4d.24xlarge",
            "instance_count": 4,
            "spot": True,
        }
    )
    states = _states(run)
    assert states["sagemaker.plan"] == "success", states
    assert states["sagemaker.train"] == "skipped"
    out = capfd.readouterr().out
    assert "Cluster size     32 devices = instances x devices per instance (ml.p4d.24xlarge: 8)" in out
    assert "Cost bound       <= $" in out
    assert '"EnableManagedSpotTraining": true' in out
    assert states["sagemaker.stop_orphaned_job"] == "success"  # a no-op: nothing was launched


def test_invalid_conf_fails_plan_without_retry(retraining_dag):
    run = retraining_dag.test(run_conf={"backend": "local", "strategy": "smp_v1"})
    states = _states(run)
    assert states["local.plan"] == "failed", states
    assert states["local.train"] in ("upstream_failed", "skipped")
    # failed once, at once: no retry (retry_policy on 3.3, AirflowFailException before it)
    [plan] = [ti for ti in run.get_task_instances() if ti.task_id == "local.plan"]
    assert plan.try_number == 1


def test_upstream_dag_writes_new_data_and_updates_the_asset_that_schedules_retraining(
    retraining_dag, demo_dir, monkeypatch
):
    from airflow_dist_training.compat import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags" / "demo_new_training_data.py"), safe_mode=False)
    assert bag.import_errors == {}
    producer = bag.dags["demo_new_training_data"]
    before = (demo_dir / "source" / "train" / "data.csv").read_bytes()
    run = producer.test(run_conf={"seed": 11})
    assert str(run.state) == "success", _states(run)
    assert (demo_dir / "source" / "train" / "data.csv").read_bytes() != before
    [event] = _asset_events(run.run_id)
    assert event["uri"] == "s3://adt-demo-bucket/data/train"  # Airflow normalises the URI
    assert event["extra"]["seed"] == 11
    # the asset the producer updates is one the retraining DAG is scheduled on
    assert "s3://adt-demo-bucket/data/train" in str(retraining_dag.timetable.asset_condition)
