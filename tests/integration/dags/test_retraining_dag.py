"""The ready retraining DAG with dag.test(): local end to end, resume on the second run, dry runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
DAG_FILE = REPO / "dags" / "distributed_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    demo = tmp_path_factory.mktemp("demo")
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_dataset.py"), "--out", str(demo / "source")],
        check=True,
        capture_output=True,
    )
    return demo


@pytest.fixture
def retraining_dag(demo_dir: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("ADT_DEMO_DIR", str(demo_dir))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo_dir / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_local_run_trains_passes_the_gate_and_registers_then_a_rerun_resumes(retraining_dag, demo_dir, capfd):
    run = retraining_dag.test(run_conf={"backend": "local", "epochs": 4})
    states = _states(run)
    assert str(run.state) == "success", states
    assert states["local.train"] == "success"
    assert states["local.gate"] == "success"
    assert states["local.register"] == "success"
    assert states["sagemaker.plan"] == "skipped"
    summary = (demo_dir / "last-run-summary.txt").read_text()
    assert "Quality gate        PASSED" in summary
    assert "Registered          adt-demo/1 (Approved)" in summary
    first = capfd.readouterr().out

    assert "starting from scratch" in first
    rerun = retraining_dag.test(run_conf={"backend": "local", "epochs": 5})
    assert str(rerun.state) == "success", _states(rerun)
    second = capfd.readouterr().out
    # a new run seeds its checkpoint location from the previous run's latest complete checkpoint
    assert "Seeded " in second and "from the latest complete checkpoint" in second
    assert "resumed from checkpoint step-" in second
    assert "starting at epoch=4" in second  # epochs 0-3 were trained by the first run
    # the second model is gated against the first (now the champion): registered only if no worse
    summary = (demo_dir / "last-run-summary.txt").read_text()
    assert "no regression vs champion adt-demo/1" in summary
    assert ("Registered          adt-demo/2 (Approved)" in summary) == (
        "Quality gate        PASSED" in summary
    )


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
