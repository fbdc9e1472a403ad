"""evaluate -> gate -> register on the local registry, run end to end with ``dag.test()``."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EVAL_SCRIPT = """
import argparse, hashlib, json, pathlib
p = argparse.ArgumentParser()
p.add_argument("--model-dir"); p.add_argument("--output-dir")
a = p.parse_args()
acc = float(pathlib.Path(a.model_dir, "quality.txt").read_text())
print(f"accuracy={acc}")
pathlib.Path(a.output_dir, "evaluation.json").write_text(json.dumps({
    "metrics": {"accuracy": acc, "loss": 1 - acc},
    "slices": {"short": {"accuracy": acc - 0.05}},
    "evaluation_set_hash": "sha256:" + hashlib.sha256(b"eval-set-v1").hexdigest(),
}))
"""


def make_model(tmp: Path, name: str, accuracy: float) -> Path:
    src = tmp / f"{name}-quality.txt"
    src.write_text(str(accuracy))
    archive = tmp / name / "model.tar.gz"
    archive.parent.mkdir(parents=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname="quality.txt")
    return archive


DAG_FILE = """
import json, pathlib
from typing import Any

from airflow.sdk import DAG, task

from airflow_dist_training.operators.evaluation import EvaluationOperator, QualityGateOperator, RegisterModelOperator

HERE = pathlib.Path(__file__).parent
for cfg_path in sorted(HERE.glob("*.json")):
    cfg = json.loads(cfg_path.read_text())
    dag_id, tmp = cfg["dag_id"], cfg["tmp"]
    with DAG(dag_id, schedule=None, catchup=False) as dag:

        @task
        def train(dag_id: str = dag_id, model: str = cfg["model"]) -> dict[str, Any]:
            return {"backend": "local", "job_name": f"{dag_id}-job", "job_arn": f"local://{tmp}/jobs/{dag_id}",
                    "status": "Completed", "model_artifact_uri": f"file://{model}"}

        trained = train()
        evaluate = EvaluationOperator(
            task_id="evaluate",
            script=f"{tmp}/evaluate.py",
            model_uri="{{ ti.xcom_pull(task_ids='train')['model_artifact_uri'] }}",
            output_uri=f"{tmp}/eval/{dag_id}",
        )
        gate = QualityGateOperator(
            task_id="gate",
            evaluation=evaluate.output,
            thresholds={
                "accuracy": {"min": 0.8, "no_regression": True},
                "loss": {"direction": "lower_is_better", "max": 0.3},
            },
            registry="local",
            model_package_group_name="churn",
            local_registry_dir=f"{tmp}/registry",
            fail_on_reject=cfg["fail_on_reject"],
        )
        register = RegisterModelOperator(
            task_id="register",
            evaluation=evaluate.output,
            decision=gate.output,
            training=trained,
            registry="local",
            model_package_group_name="churn",
            local_registry_dir=f"{tmp}/registry",
            auto_approve=True,
        )
        trained >> evaluate >> gate >> register
    globals()[dag_id] = dag
"""


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAG bundle in tmp_path: ``dag.test()`` serialises the DAG from a bundle, not from memory."""
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "eval_dags.py").write_text(DAG_FILE)
    (tmp_path / "evaluate.py").write_text(EVAL_SCRIPT)
    monkeypatch.setenv(
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST",
        json.dumps(
            [
                {
                    "name": f"eval-tests-{tmp_path.name}",
                    "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                    "kwargs": {"path": str(folder), "refresh_interval": 0},
                }
            ]
        ),
    )
    return folder


def build_dag(dag_id: str, tmp: Path, model: Path, *, fail_on_reject: bool = False) -> Any:
    import importlib.util

    bundle = tmp / "dags"
    (bundle / f"{dag_id}.json").write_text(
        json.dumps({"dag_id": dag_id, "tmp": str(tmp), "model": str(model), "fail_on_reject": fail_on_reject})
    )
    spec = importlib.util.spec_from_file_location(f"eval_dags_{dag_id}", bundle / "eval_dags.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, dag_id)


def states(dr: Any) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dr.dag_id, run_id=dr.run_id).all()
        return {ti.task_id: str(ti.state.value if hasattr(ti.state, "value") else ti.state) for ti in tis}


def xcom(dr: Any, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id=task_id, key=key)
            .one_or_none()
        )
        if row is None:
            return None
        value = row.value
        if isinstance(value, (str, bytes)):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                return value
        return value


@pytest.mark.slow
def test_passing_gate_registers_and_failing_gate_skips_registration(
    airflow_db: Path, bundle: Path, tmp_path: Path
) -> None:
    from airflow_dist_training.hooks.registry import LocalModelRegistry

    # Run 1: no champion yet, accuracy 0.9 passes -> version 1, auto-approved.
    dr = build_dag("adt_eval_first", tmp_path, make_model(tmp_path, "m1", 0.9)).test()
    assert states(dr) == {"train": "success", "evaluate": "success", "gate": "success", "register": "success"}
    registry = LocalModelRegistry(tmp_path / "registry", "churn")
    [v1] = registry.versions()
    assert v1["approval_status"] == "Approved" and v1["training_job_name"] == "adt_eval_first-job"
    evaluation = xcom(dr, "evaluate")
    assert evaluation["metrics"] == {"accuracy": 0.9, "loss": pytest.approx(0.1)}
    assert evaluation["evaluation_uri"] == str(tmp_path / "eval" / "adt_eval_first" / "evaluation.json")
    report = tmp_path / "eval" / "adt_eval_first" / "evaluation_report.html"
    assert report.is_file() and "Quality gate: PASSED" in report.read_text()
    assert xcom(dr, "gate", "evaluation_report_link")["uri"] == str(report)
    assert xcom(dr, "gate", "_link_EvaluationReportLink") == f"file://{report}"  # what the UI shows
    assert xcom(dr, "register", "_link_RegistrationAuditLink") == f"file://{v1['audit_uri']}"
    audit = json.loads(Path(v1["audit_uri"]).read_text())
    assert audit["gate"]["reasons"][0] == "PASS accuracy: 0.9 >= 0.8 (min)"

    # Run 2: a worse model (0.85 < champion 0.9) -> gate rejects, register is skipped.
    dr = build_dag("adt_eval_second", tmp_path, make_model(tmp_path, "m2", 0.85)).test()
    assert states(dr) == {"train": "success", "evaluate": "success", "gate": "success", "register": "skipped"}
    assert len(registry.versions()) == 1
    decision = xcom(dr, "gate")
    assert decision["passed"] is False
    assert decision["champion"]["id"] == "churn/1"
    assert decision["reasons"] == [
        "PASS accuracy: 0.85 >= 0.8 (min)",
        "FAIL accuracy: no regression vs champion churn/1: 0.85 >= 0.9",
        "PASS loss: 0.15 <= 0.3 (max)",
    ]
    report = (tmp_path / "eval" / "adt_eval_second" / "evaluation_report.md").read_text()
    assert "**Quality gate: REJECTED**" in report and "| accuracy | 0.85 | 0.9 | -0.05 |" in report


@pytest.mark.slow
def test_fail_on_reject_fails_the_run(airflow_db: Path, bundle: Path, tmp_path: Path) -> None:
    dr = build_dag("adt_eval_fail", tmp_path, make_model(tmp_path, "m1", 0.5), fail_on_reject=True).test()
    assert states(dr) == {
        "train": "success",
        "evaluate": "success",
        "gate": "failed",
        "register": "upstream_failed",
    }
    assert xcom(dr, "gate")["reasons"][0] == "FAIL accuracy: 0.5 >= 0.8 (min)"
