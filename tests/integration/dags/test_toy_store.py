"""A store defined only in the tests, registered for its scheme, holds the shipped DAG's checkpoints and models.

Nothing else is edited to add it: ``tests/toy_store.py`` registers an in-memory store for
``mem://``, and the DAG's ``ADT_DEMO_STORE`` points its checkpoint and model locations there. The
job runs in the job environment, which has none of this; the task process reaches the store: it
restores the run's checkpoints before a job starts, syncs them while and after it runs, uploads the
model, and retention, promotion, evaluation and registration read and write it there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.hooks.checkpoints import CheckpointHook
from tests.datasets import make_dataset
from tests.paths import REPO
from tests.toy_store import MemoryStore, memory_store_registered

DAG_FILE = REPO / "dags" / "distributed_retraining.py"
STORE = "mem://demo-bucket/adt-demo"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("retraining-dag")]


@pytest.fixture
def toy_store() -> Iterator[MemoryStore]:
    with memory_store_registered() as store:
        yield store


@pytest.fixture
def retraining_dag(
    toy_store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> Any:
    from airflow_dist_training.compat import DagBag

    make_dataset(tmp_path / "source")
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    monkeypatch.setenv("ADT_DEMO_STORE", STORE)
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(tmp_path / "jobs"))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return bag.dags["distributed_retraining"]


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_the_shipped_dag_keeps_its_checkpoints_and_models_in_a_store_registered_in_a_test(
    retraining_dag, toy_store, tmp_path, capfd, monkeypatch
):
    dag = retraining_dag
    # Run 1: its first job is killed at epoch 1; the retry's job (a new job directory) resumes from
    # the checkpoint the task process synced into the toy store: nothing else holds it
    monkeypatch.setenv("ADT_DEMO_KILL_AT_EPOCH", "1")
    dag.get_task("local.train").retry_delay = timedelta(seconds=0)
    run = dag.test(run_conf={"backend": "local", "epochs": 2})

    states = _states(run)
    assert str(run.state) == "success", states
    for task in (
        "local.plan",
        "local.stage",
        "local.check_changes",
        "local.train",
        "local.evaluate",
        "local.gate",
        "local.register",
    ):
        assert states[task] == "success", (task, states)
    [train] = [ti for ti in run.get_task_instances() if ti.task_id == "local.train"]
    assert train.try_number == 2
    out = capfd.readouterr().out
    assert "killing this job at epoch=1" in out
    hook = CheckpointHook(aws_conn_id=None)
    store, runs = hook.stores.parse(f"{STORE}/checkpoints/local-demo/")
    [job] = store.list_dirs(runs)  # the run's own prefix, named after its first job
    run_root = f"{STORE}/checkpoints/local-demo/{job}"
    [first, last] = sorted(hook.scan(run_root), key=lambda c: c.step)  # keep_last=2: one per epoch
    assert first.complete and last.complete
    assert (first.manifest["epoch"], last.manifest["epoch"]) == (0, 1)  # type: ignore[index]
    assert f"Resuming from this run's own checkpoint {run_root}/step-{first.step:012d}/" in out
    # the job's log names the request's URI and where the local backend keeps it: the toy store
    request_uri, store_uri = (
        re.escape(f"s3://adt-demo-bucket/checkpoints/local-demo/{job}"),
        re.escape(f"{run_root}/"),
    )
    assert re.search(rf"\[local\] restored \d+ checkpoint file\(s\) from {request_uri} \({store_uri}\)", out)
    assert f"resumed from this run's checkpoint step-{first.step:012d} (epoch=0), starting at epoch=1" in out
    assert re.search(rf"\[local\] synced \d+ checkpoint file\(s\) to {request_uri} \({store_uri}\)", out)
    assert sorted(store.list_tree(runs.child(job))) == [
        "_LATEST.json",
        "_PROMOTED.json",
        f"step-{first.step:012d}/_MANIFEST.json",
        f"step-{first.step:012d}/state.pt",
        f"step-{last.step:012d}/_MANIFEST.json",
        f"step-{last.step:012d}/state.pt",
    ]
    # the best checkpoint (loss) is promoted to the stable location, in the store too
    promoted = hook.read_promotions(run_root)["current"]
    best = min((first, last), key=lambda c: c.metrics["loss"])
    assert (promoted["step"], promoted["target_uri"]) == (best.step, f"{STORE}/checkpoints/promoted/"), (
        promoted
    )
    assert hook.holds_checkpoint(f"{STORE}/checkpoints/promoted/")
    # the model went to the store, and evaluation and the registry read it there
    model = f"{STORE}/models/{job}/output/model.tar.gz"
    assert toy_store.objects[("demo-bucket", model.split("/", 3)[3])][0][:2] == b"\x1f\x8b"  # gzip
    [version] = json.loads((tmp_path / "registry" / "adt-demo" / "index.json").read_text())["versions"]
    assert version["model_data_uri"] == model and version["approval_status"] == "Approved"
    assert f"Model artifact      {model}" in (tmp_path / "last-run-summary.txt").read_text()
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "models").exists()

    # Run 2: nothing changed since the champion: skipped with the reason; the store is as run 1 left it
    objects = dict(toy_store.objects)
    run = dag.test(run_conf={"backend": "local", "epochs": 2})

    states = _states(run)
    assert str(run.state) == "success", states
    assert states["local.check_changes"] == "success" and states["local.train"] == "skipped", states
    assert "no new data or code since champion adt-demo/1" in capfd.readouterr().out
    assert toy_store.objects == objects
