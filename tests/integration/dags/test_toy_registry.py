"""A model registry defined only here, registered by kind, holds the shipped DAG's models.

Nothing else is edited to add it: its record goes into the registry of registries
(``spec/registries.py``), and the local backend's record is registered again with it as its
default registry (the DAG's registry step names no kind, so it takes the backend's). The DAG, the
task group and the gate, register and check_changes tasks only ever see the kind ``toy``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.gate import Champion
from airflow_dist_training.evaluation.registration import APPROVED, approval_status
from airflow_dist_training.evaluation.schema import load_evaluation_file
from airflow_dist_training.spec.backends import backend_record, register_backend
from airflow_dist_training.spec.registries import (
    RegistryRecord,
    RegistryStepModel,
    forget_registry,
    register_registry,
)
from tests.datasets import make_dataset
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "distributed_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]


class ToyRegistryStep(RegistryStepModel):
    """The pipeline step of the toy kind."""

    kind: Literal["toy"] = "toy"
    local_dir: str | None = None


class JsonFileRegistry:
    """A model registry in one JSON file per group: ``<local_dir>/<group>.toy.json``."""

    kind = "toy"

    def __init__(self, *, group: str, local_dir: str, **_: Any) -> None:
        self.group = group
        self.path = Path(local_dir) / f"{group}.toy.json"

    def versions(self) -> list[dict[str, Any]]:
        return json.loads(self.path.read_text()) if self.path.exists() else []

    def get_champion(self) -> Champion | None:
        approved = [v for v in self.versions() if v["approval_status"] == APPROVED]
        if not approved:
            return None
        entry = approved[-1]
        return Champion(
            id=entry["package_id"],
            evaluation=load_evaluation_file(entry["evaluation_uri"]),
            evaluation_uri=entry["evaluation_uri"],
            version=entry["version"],
            model_data_uri=entry["model_data_uri"],
            lineage=entry["lineage"],
        )

    def register(
        self,
        *,
        model_data_uri: str,
        evaluation_uri: str,
        decision: Mapping[str, Any] | None,
        auto_approve: bool = False,
        training: Mapping[str, Any] | None = None,
        lineage: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        versions = self.versions()
        entry = {
            "version": len(versions) + 1,
            "package_id": f"toy:{self.group}/{len(versions) + 1}",
            "approval_status": approval_status(decision, auto_approve),
            "model_data_uri": model_data_uri,
            "evaluation_uri": evaluation_uri,
            "training_job_name": (training or {}).get("job_name"),
            "lineage": dict(lineage or {}),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps([*versions, entry]))
        return {"registry": self.kind, "group": self.group, **entry}

    def set_approval(self, package_id: str, status: str, description: str | None = None) -> None:
        raise NotImplementedError


TOY = RegistryRecord(name="toy", step=ToyRegistryStep, factory=JsonFileRegistry, local_dir=True)


@pytest.fixture
def toy_registry() -> Iterator[RegistryRecord]:
    local = backend_record("local")
    register_registry(TOY)
    register_backend(dataclasses.replace(local, default_registry="toy"))
    yield TOY
    register_backend(local)
    forget_registry(TOY.name)


@pytest.fixture
def retraining_dag(
    toy_registry: RegistryRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> Any:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source")
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def test_the_shipped_dag_registers_in_a_registry_registered_in_a_test(retraining_dag, tmp_path, capfd):
    dag = retraining_dag
    assert dag.get_task("local.register").registry == "toy"

    run = dag.test(run_conf={"backend": "local", "epochs": 1})

    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in ("local.check_changes", "local.train", "local.evaluate", "local.gate", "local.register"):
        assert states[task] == "success", (task, states)
    [version] = json.loads((tmp_path / "registry" / "adt-demo.toy.json").read_text())
    assert version["approval_status"] == "Approved" and version["training_job_name"]
    assert not (tmp_path / "registry" / "adt-demo" / "index.json").exists()  # not the local registry
    assert "Registered          toy:adt-demo/1 (Approved)" in (tmp_path / "last-run-summary.txt").read_text()
    capfd.readouterr()

    # Run 2: the champion is read back from the toy registry; nothing changed, so nothing trains
    run = dag.test(run_conf={"backend": "local", "epochs": 1})

    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["local.check_changes"] == "success" and states["local.train"] == "skipped", states
    assert "no new data or code since champion toy:adt-demo/1" in capfd.readouterr().out


def test_a_pipeline_yaml_takes_a_registered_kind_and_names_the_kinds_for_an_unknown_one(
    toy_registry, tmp_path
) -> None:
    from airflow_dist_training.pipeline_checks import load_pipeline

    path = tmp_path / "p.yaml"
    spec = REPO / "examples" / "specs" / "local_demo.yaml"
    path.write_text(f"dag_id: d\ntraining: {spec}\nregistry: {{kind: toy, model_package_group: g}}\n")
    pipeline = load_pipeline(path)
    assert isinstance(pipeline.registry, ToyRegistryStep)
    assert pipeline.registry.local_dir  # a kind with a directory gets the pipeline's workspace
    path.write_text(f"dag_id: d\ntraining: {spec}\nregistry: {{kind: wandb}}\n")
    with pytest.raises(SpecValidationError) as refused:
        load_pipeline(path)
    assert refused.value.render() == (
        f"{path}: registry.kind: unknown registry kind 'wandb'; registered kinds: local, sagemaker, mlflow, toy"
    )
