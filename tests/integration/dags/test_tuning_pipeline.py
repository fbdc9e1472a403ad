"""The shipped YAML pipeline with a `tuning` step, on the local backend (dag.test()): the tuning job
runs one training job per learning rate, and its best training job (train:accuracy) is the one
evaluated, gated and registered. The same file on the test endpoint:
``tests/integration/emulator/test_tuning_on_emulator.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.datasets import make_dataset
from tests.paths import REPO

PIPELINE = REPO / "dags" / "pipelines" / "tuning_local.yaml"
STUB = "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("yaml-retraining")]


def test_the_tuning_step_registers_its_best_training_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> None:
    from airflow_dist_training.compat import DagBag
    from airflow_dist_training.local.tuning import LEDGER

    demo = tmp_path / "demo"
    make_dataset(demo / "tuning", train=1000, test=400)
    text = PIPELINE.read_text().replace("../../.adt-demo", str(demo)).replace("../../", f"{REPO}/")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "tuning_local.yaml").write_text(text)
    (dags / "tuning_local.py").write_text(STUB)
    monkeypatch.setenv("ADT_LOCAL_ROOT", str(demo / "jobs"))
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    run = bag.dags["tuning_local_yaml"].test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    assert states["stage_train_evaluate.register"] == "success", states

    train = next(ti for ti in run.get_task_instances() if ti.task_id == "stage_train_evaluate.train")
    result = train.xcom_pull(task_ids=train.task_id)
    tuning = result["tuning"]
    # the request the local tuning job ran (its ledger keeps what CreateHyperParameterTuningJob carried)
    ledger = json.loads((demo / "jobs" / tuning["job_name"] / LEDGER).read_text())
    config = ledger["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Grid"
    assert config["HyperParameterTuningJobObjective"] == {"MetricName": "train:accuracy", "Type": "Maximize"}
    assert config["ResourceLimits"]["MaxRuntimeInSeconds"] == 3600
    # script mode: each value JSON-quoted, as the SageMaker SDK sends it
    assert config["ParameterRanges"]["CategoricalParameterRanges"] == [
        {"Name": "lr", "Values": ['"0.001"', '"0.1"']}
    ]
    # the best job chosen: the highest train:accuracy of its training jobs
    jobs = {j["job_name"]: j for j in tuning["training_jobs"]}
    assert len(jobs) == 2 and all(j["status"] == "Completed" for j in jobs.values()), jobs
    best = max(jobs.values(), key=lambda j: j["objective_value"])
    assert result["job_name"] == best["job_name"] and tuning["objective_value"] == best["objective_value"]
    # the registered model is the best training job's
    index = demo / "registry-tuning" / "local-tuned" / "index.json"
    [version] = json.loads(index.read_text())["versions"]
    assert version["training_job_name"] == best["job_name"]
    assert (
        version["model_data_uri"] == result["model_artifact_uri"]
        and best["job_name"] in version["model_data_uri"]
    )

    # the Training view's JSON for the run (ui/app.run_view): one chart per metric with each
    # training job's curve, read from that job's own metrics file, the best one marked
    from airflow.utils.session import create_session

    from airflow_dist_training.ui.app import run_view

    with create_session() as session:
        view = run_view(session, run.dag_id, run.run_id)
    (block,) = view["members"]
    assert block["tuning_job"] == tuning["job_name"] and block["winner"] == best["job_name"]
    assert [(m["member"], m["winner"], m["status"]) for m in block["members"]] == [
        (name, name == best["job_name"], "Completed") for name in jobs
    ]
    for metric in ("train:accuracy", "train:loss"):
        curves = block["metrics"][metric]
        assert [(c["member"], c["winner"]) for c in curves] == [(n, n == best["job_name"]) for n in jobs], metric
        assert all(c["points"] for c in curves), curves
    # each curve is its own job's: its last accuracy is the job's objective value
    last = {c["member"]: c["points"][-1]["value"] for c in block["metrics"]["train:accuracy"]}
    assert last == {name: pytest.approx(job["objective_value"]) for name, job in jobs.items()}
