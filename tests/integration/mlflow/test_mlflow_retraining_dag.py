"""The shipped retraining DAG with ``registry.kind: mlflow`` against a real MLflow server, three runs.

1. trains, registers version 1 and points the ``champion`` alias at it;
2. is skipped, citing the champion;
3. with new data, trains, is gated against version 1 and registers version 2.

What the server holds is read through MLflow's own client (``tests/mlflow_server.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.datasets import make_dataset
from tests.mlflow_server import registry_state, runs_state
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "distributed_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("mlflow")]


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_the_shipped_dag_registers_skips_and_retrains_against_mlflow(
    mlflow_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path, capfd: Any
) -> None:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source")
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    monkeypatch.setenv("ADT_DEMO_REGISTRY", "mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    dag = bag.dags["distributed_retraining"]
    assert dag.get_task("local.register").registry == "mlflow"

    # Run 1: no champion yet -> trains, passes the gate, registers v1, the alias points at it
    run1 = dag.test(run_conf={"backend": "local", "epochs": 1})
    states = _states(run1)
    assert str(run1.state) == "success", states
    assert states["local.train"] == states["local.gate"] == states["local.register"] == "success", states
    assert "no champion yet: training (data fingerprint " in capfd.readouterr().out
    summary = (tmp_path / "last-run-summary.txt").read_text()
    assert "Registered          models:/adt-demo/1 (Approved)" in summary

    # Run 2: same data, code and spec -> skipped, citing the champion read back from MLflow
    run2 = dag.test(run_conf={"backend": "local", "epochs": 1})
    states = _states(run2)
    assert states["local.check_changes"] == "success", states
    for task in ("local.train", "local.evaluate", "local.gate", "local.register"):
        assert states[task] == "skipped", (task, states)
    assert (
        "no new data or code since champion models:/adt-demo/1 (data fingerprint " in capfd.readouterr().out
    )

    # Run 3: new training data (the same evaluation set) -> trains 2 more epochs from the champion's
    # weights, gated against v1 with v1's metrics read from MLflow
    new = make_dataset(tmp_path / "new", seed=7)
    shutil.copy(new / "train" / "data.csv", tmp_path / "source" / "train" / "data.csv")
    run3 = dag.test(run_conf={"backend": "local", "epochs": 2, "warm_start": "champion"})
    states = _states(run3)
    assert str(run3.state) == "success", states
    out = capfd.readouterr().out
    assert "data and spec changed since champion models:/adt-demo/1: training" in out
    summary = (tmp_path / "last-run-summary.txt").read_text()
    assert "vs champion models:/adt-demo/1" in summary and "Quality gate        PASSED" in summary, summary
    assert "Registered          models:/adt-demo/2 (Approved)" in summary

    state = registry_state(mlflow_server, "adt-demo")
    assert state["aliases"] == {"champion": "2"}
    v1, v2 = state["versions"][1], state["versions"][2]
    for version in (v1, v2):
        tags = version["tags"]
        assert version["status"] == "READY" and tags["registration"] == "complete"
        assert float(tags["metric.accuracy"]) >= 0.8 and "metric.loss" in tags
        assert tags["data_fingerprint"].startswith("sha256:") and tags["code_hash"].startswith("sha256:")
        assert tags["spec_hash"].startswith("sha256:") and tags["training_job_name"]
        assert tags["gate_decision"] == "passed" and tags["training_backend"] == "local"
        assert version["source"].startswith("mlflow-artifacts:/") and version["source"].endswith("/model")
    assert v2["tags"]["data_fingerprint"] != v1["tags"]["data_fingerprint"]
    assert v2["tags"]["champion_compared_with"] == "models:/adt-demo/1"
    assert v1["tags"]["run_id"] == run1.run_id and v2["tags"]["run_id"] == run3.run_id

    # Tracking: each training job is a FINISHED run with its params, per-epoch curves, the job's
    # name, backend and link, and the evaluation's metrics; each version belongs to its job's run
    runs = {run["tags"]["training_job"]: run for run in runs_state(mlflow_server, "adt-demo")}
    job1, job3 = v1["tags"]["training_job_name"], v2["tags"]["training_job_name"]
    assert set(runs) == {job1, job3}
    for job, version, epochs in ((job1, v1, 1), (job3, v2, 2)):
        run = runs[job]
        assert run["run_id"] == version["run_id"] and run["status"] == "FINISHED"
        assert run["params"]["epochs"] == str(epochs) and run["params"]["compute.instance_type"]
        assert run["tags"]["training_backend"] == "local" and run["tags"]["training_job_link"]
        assert [step for step, _ in run["history"]["train:loss"]] == list(range(epochs))
        assert [step for step, _ in run["history"]["train:accuracy"]] == list(range(epochs))
        assert run["history"]["eval_accuracy"][0][1] == float(version["tags"]["metric.accuracy"])


def test_an_unreachable_tracking_server_fails_the_plan_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path, capfd: Any, caplog: Any
) -> None:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source")
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    monkeypatch.setenv("ADT_DEMO_REGISTRY", "mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    dag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False).dags["distributed_retraining"]
    dag.get_task("local.plan").retries = 0

    run = dag.test(run_conf={"backend": "local", "epochs": 1})

    states = _states(run)
    assert states["local.plan"] == "failed" and states["local.train"] in ("upstream_failed", "None"), states
    assert not (tmp_path / "jobs").exists()  # no job was started
    out, err = capfd.readouterr()
    assert f"registry: cannot reach the MLflow tracking server {uri}: " in out + err + caplog.text
