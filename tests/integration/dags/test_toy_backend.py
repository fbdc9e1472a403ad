"""A backend defined only in the tests, registered by name, runs the shipped retraining DAG on the
backend protocol alone (``planning.TrainingBackend``).

Nothing else is edited to add it: its record goes into the registry (``spec/backends.py``), and
the shipped DAG, which builds one ``stage_train_evaluate`` group per registered backend, gets a
``toy`` group. The toy (``tests/toy_backend.py``) is durable (its jobs outlive the operator that
created them: the training task finds them again by name) and not on AWS; it subclasses nothing of
the project. Its jobs run on this machine's request executor, and it reports their states in its
own terms as a ``JobStatus``: the operator, the task group and the checkpoint watcher read nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.spec.backends import BackendRecord, forget_backend
from tests import toy_backend
from tests.datasets import make_dataset
from tests.paths import REPO

DAG_FILE = REPO / "dags" / "distributed_retraining.py"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BackendRecord]:
    monkeypatch.setenv("TOY_SERVICE_DIR", str(tmp_path / "toy-service"))
    monkeypatch.delenv("TOY_JOB_SECONDS", raising=False)  # its jobs run their requests here
    toy_backend.register()
    yield toy_backend.TOY
    forget_backend(toy_backend.TOY.name)


@pytest.fixture
def retraining_dag(
    toy: BackendRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> Any:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source")
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def test_the_shipped_dag_runs_end_to_end_on_a_backend_registered_in_a_test(
    retraining_dag, tmp_path, capfd, monkeypatch
):
    dag = retraining_dag
    assert dag.params["backend"] == "local"  # the form offers every registered backend
    assert "toy" in dag.params.get_param("backend").schema["enum"]
    assert {"toy.plan", "toy.stage", "toy.train", "toy.evaluate", "toy.gate", "toy.register"} <= set(
        dag.task_dict
    )
    # the run's first job dies at epoch 1 and the toy reports it reclaimed, as spot capacity is:
    # the training task goes on with the run's next job, which resumes from the run's checkpoint
    monkeypatch.setenv("ADT_DEMO_KILL_AT_EPOCH", "1")
    toy_backend.reclaim_next(1)

    run = dag.test(run_conf={"backend": "toy", "epochs": 2})

    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    for task in (
        "toy.plan",
        "toy.stage",
        "toy.check_changes",
        "toy.train",
        "toy.evaluate",
        "toy.gate",
        "toy.register",
    ):
        assert states[task] == "success", (task, states)
    assert states["local.plan"] == states["sagemaker.plan"] == "skipped"
    [train] = [ti for ti in run.get_task_instances() if ti.task_id == "toy.train"]
    assert train.try_number == 1  # an interruption does not use up the task's retries
    first, second = toy_backend.creates()  # the run's two generations, created once each
    assert toy_backend.reclaimed() == {first}
    out = capfd.readouterr().out
    assert "killing this job at epoch=1" in out
    assert (
        f"This run's earlier job {first} ended reclaimed (capacity reclaimed) (interrupted); starting generation 2."
        in out
    )
    assert "resumed from this run's checkpoint step-" in out and "(epoch=0), starting at epoch=1" in out
    summary = (tmp_path / "last-run-summary.txt").read_text()
    assert f"after a spot interruption of job {first}" in summary
    assert "Registered          adt-demo/1 (Approved)" in summary
    index = json.loads((tmp_path / "registry" / "adt-demo" / "index.json").read_text())
    [version] = index["versions"]  # its default registry (local) holds the approved model
    assert version["training_job_name"] == second
    audit = json.loads(Path(version["audit_uri"]).read_text())
    assert audit["training_job"]["backend"] == "toy"  # the result names the backend that ran it
