"""A YAML `sweep` with ``backend: sagemaker`` on the SageMaker test endpoint: four training jobs
(one per hyperparameter set), four evaluation processing jobs, and exactly one model package: the
best set's, in the sweep's group. Asserted from the endpoint's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.datasets import make_dataset

from .conftest import REPO, fast_polling, serve_dags_folder

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
BUCKET = "adt-demo-bucket"


def test_a_sweep_of_four_sets_on_sagemaker_registers_only_the_best(
    aws_default_on_endpoint: Any, airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_dist_training.compat import DagBag

    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    data = make_dataset(tmp_path / "data", train=1000, test=400)
    s3.upload_file(str(data / "train" / "data.csv"), BUCKET, "markets/all/train/data.csv")

    pipeline = yaml.safe_load((REPO / "dags" / "pipelines" / "markets_local.yaml").read_text())
    pipeline.pop("for_each")
    training = pipeline["training"]
    training["source"]["source_dir"] = str(REPO / "examples")
    training["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    pipeline.update(
        {
            "dag_id": "sweep_on_sagemaker",
            "retries": 0,
            "backend": "sagemaker",
            "sweep": {
                "strategy": "grid",
                "ranges": {"lr": [0.001, 0.1], "hidden": [8, 32]},
                "objective": {"metric": "accuracy", "type": "Maximize"},
            },
            "evaluation": {
                "script": str(REPO / "examples" / "evaluate.py"),
                "channel_source": str(data / "test"),
                "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
            },
            "registry": {"model_package_group": "sweep-mlp", "auto_approve": True},
        }
    )
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "sweep_on_sagemaker.yaml").write_text(yaml.safe_dump(pipeline))
    (dags / "sweep_on_sagemaker.py").write_text(
        "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
    )
    serve_dags_folder(dags, monkeypatch)
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    run = fast_polling(bag.dags["sweep_on_sagemaker"]).test()
    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "success", states
    sm = endpoint.client("sagemaker")
    jobs = sm.list_training_jobs()["TrainingJobSummaries"]
    assert len(jobs) == 4 and len(sm.list_processing_jobs()["ProcessingJobSummaries"]) == 4
    lrs = {
        sm.describe_training_job(TrainingJobName=j["TrainingJobName"])["HyperParameters"]["lr"] for j in jobs
    }
    assert lrs == {"0.001", "0.1"}
    best = next(ti for ti in run.get_task_instances() if ti.task_id == "stage_train_evaluate.best_of_sweep")
    selection = best.xcom_pull(task_ids=best.task_id, key="selection")
    winner_job = best.xcom_pull(task_ids=best.task_id, key="training")["job_name"]
    assert winner_job.startswith(f"local-markets-{selection['winner']}-")
    [package] = sm.list_model_packages(ModelPackageGroupName="sweep-mlp")["ModelPackageSummaryList"]
    detail = sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])
    assert detail["CustomerMetadataProperties"]["TrainingJobName"] == winner_job
    image = sm.describe_training_job(TrainingJobName=winner_job)["AlgorithmSpecification"]["TrainingImage"]
    assert detail["InferenceSpecification"]["Containers"][0]["Image"] == image
    accuracies = [m["metrics"]["accuracy"] for m in best.xcom_pull(task_ids=best.task_id, key="members")]
    assert selection["value"] == max(accuracies)
