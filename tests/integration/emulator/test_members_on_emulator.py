"""The shipped `for_each` YAML pipeline with ``backend: sagemaker``, twice, on the SageMaker test
endpoint: three members train, evaluate and register in their own model package groups; run 2
retrains only the member whose S3 data changed. Asserted from the endpoint's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.datasets import make_dataset

from .conftest import REPO, assert_jobs_ran_in_the_job_environment, fast_polling, serve_dags_folder

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
BUCKET = "adt-demo-bucket"
MEMBERS = ("emea", "apac", "amer")


def _states(run: Any) -> dict[tuple[str, int], str]:
    return {(ti.task_id.rsplit(".", 1)[-1], ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def test_for_each_on_sagemaker_trains_every_member_then_only_the_changed_one(
    aws_default_on_endpoint: Any, airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_dist_training.compat import DagBag

    endpoint = aws_default_on_endpoint
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    for seed, member in enumerate(MEMBERS):
        data = make_dataset(tmp_path / "data" / member, train=1000, test=64, seed=seed)
        s3.upload_file(str(data / "train" / "data.csv"), BUCKET, f"markets/{member}/train/data.csv")
    holdout = make_dataset(tmp_path / "data" / "holdout", train=64, test=400, seed=99)

    pipeline = yaml.safe_load((REPO / "dags" / "pipelines" / "markets_local.yaml").read_text())
    training = pipeline["training"]
    training["source"]["source_dir"] = str(REPO / "examples")
    training["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    pipeline.update(
        {
            "dag_id": "markets_on_sagemaker",
            "backend": "sagemaker",
            "evaluation": {
                "script": str(REPO / "examples" / "evaluate.py"),
                "channel_source": str(holdout / "test"),
                "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
            },
            "registry": {"model_package_group": "markets", "auto_approve": True},
        }
    )
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "markets_on_sagemaker.yaml").write_text(yaml.safe_dump(pipeline))
    (dags / "markets_on_sagemaker.py").write_text(
        "from airflow_dist_training.dag_factory import dag_from_yaml\n\ndag = dag_from_yaml(__file__)\n"
    )
    serve_dags_folder(dags, monkeypatch)
    bag = DagBag(dag_folder=str(dags), safe_mode=False)
    assert bag.import_errors == {}
    dag = fast_polling(bag.dags["markets_on_sagemaker"])

    run = dag.test()
    states = _states(run)
    assert str(run.state) == "success", states
    sm = endpoint.client("sagemaker")
    jobs = {j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]}
    assert len(jobs) == 3
    for index, member in enumerate(MEMBERS):
        for task in ("plan", "train", "evaluate", "gate", "register"):
            assert states[(task, index)] == "success", (member, task, states)
        [job] = [j for j in jobs if j.startswith(f"local-markets-{member}-")]
        desc = sm.describe_training_job(TrainingJobName=job)
        [channel] = [c for c in desc["InputDataConfig"] if c["ChannelName"] == "train"]
        assert channel["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{BUCKET}/markets/{member}/train"
        assert desc["HyperParameters"]["lr"] == ("0.1" if member == "apac" else "0.05")
        [package] = sm.list_model_packages(ModelPackageGroupName=f"markets-{member}")[
            "ModelPackageSummaryList"
        ]
        meta = sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])[
            "CustomerMetadataProperties"
        ]
        assert meta["TrainingJobName"] == job
    assert len(sm.list_processing_jobs()["ProcessingJobSummaries"]) == 3

    # Run 2: new data for amer only
    new = make_dataset(tmp_path / "data" / "amer-new", train=1000, test=64, seed=21)
    s3.upload_file(str(new / "train" / "data.csv"), BUCKET, "markets/amer/train/data.csv")
    run = dag.test()
    states = _states(run)
    assert str(run.state) == "success", states
    for index, member in enumerate(MEMBERS):
        expected = "success" if member == "amer" else "skipped"
        assert states[("train", index)] == states[("evaluate", index)] == expected, (member, states)
    new_jobs = {j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]} - jobs
    assert len(new_jobs) == 1 and next(iter(new_jobs)).startswith("local-markets-amer-")
    for member in ("emea", "apac"):
        assert (
            len(sm.list_model_packages(ModelPackageGroupName=f"markets-{member}")["ModelPackageSummaryList"])
            == 1
        )
    assert_jobs_ran_in_the_job_environment(endpoint)
