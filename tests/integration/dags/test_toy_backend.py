"""A backend defined only here, registered by name, runs the shipped retraining DAG end to end.

Nothing else is edited to add it: its record goes into the registry (``spec/backends.py``), and
the shipped DAG, which builds one ``stage_train_evaluate`` group per registered backend, gets a
``toy`` group. The toy backend runs jobs through the local executor, as the local backend does,
under its own name and record; the DAG, the task group and the operators only ever see that.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.hooks.backends import LocalBackend
from airflow_dist_training.spec.backends import BackendRecord, forget_backend, register_backend
from tests.datasets import make_dataset
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "distributed_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]

#: the job names the toy backend ran (the DAG runs its tasks in this process under dag.test())
TOY_RUNS: list[str] = []


class ToyBackend(LocalBackend):
    """The local executor under another name, noting each job it runs."""

    def run(self, spec: Any, job_name: str, **kwargs: Any) -> Any:
        TOY_RUNS.append(job_name)
        return super().run(spec, job_name, **kwargs)


TOY = BackendRecord(
    name="toy",
    factory=lambda *, hook_kwargs=None, record=None, **_: ToyBackend(hook_kwargs, record=record),
    staging="directory",
    evaluation="process",
    default_registry="local",
    durable=False,
    on_aws=False,
    description="a test's backend: the local executor under another name",
)


@pytest.fixture
def toy_backend() -> Iterator[BackendRecord]:
    register_backend(TOY)
    TOY_RUNS.clear()
    yield TOY
    forget_backend(TOY.name)


@pytest.fixture
def retraining_dag(
    toy_backend: BackendRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> Any:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source")
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def test_the_shipped_dag_runs_end_to_end_on_a_backend_registered_in_a_test(retraining_dag, tmp_path, capfd):
    dag = retraining_dag
    assert dag.params["backend"] == "local"  # the form offers every registered backend
    assert "toy" in dag.params.get_param("backend").schema["enum"]
    assert {"toy.plan", "toy.stage", "toy.train", "toy.evaluate", "toy.gate", "toy.register"} <= set(dag.task_dict)

    run = dag.test(run_conf={"backend": "toy", "epochs": 1})

    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in ("toy.plan", "toy.stage", "toy.check_changes", "toy.train", "toy.evaluate", "toy.gate", "toy.register"):
        assert states[task] == "success", (task, states)
    assert states["local.plan"] == states["sagemaker.plan"] == "skipped"
    [job] = TOY_RUNS  # the training task ran its job through the toy backend object
    out = capfd.readouterr().out
    assert "epoch=0 loss=" in out
    index = json.loads((tmp_path / "registry" / "adt-demo" / "index.json").read_text())
    [version] = index["versions"]  # its default registry (local) holds the approved model
    assert version["training_job_name"] == job
    audit = json.loads(Path(version["audit_uri"]).read_text())
    assert audit["training_job"]["backend"] == "toy"  # the result names the backend that ran it
    assert "Registered          adt-demo/1 (Approved)" in (tmp_path / "last-run-summary.txt").read_text()
