"""The shipped mapped DAG (``dags/mapped_retraining.py``) with ``backend=sagemaker``, twice, on the
SageMaker test endpoint: the branch picks the ``sagemaker`` mapped group; three members train on
their own S3 prefixes, are evaluated by processing jobs, gated and registered in their own model
package groups; run 2 retrains only the member whose S3 data changed. Asserted from the endpoint's
state and the run's summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.datasets import make_dataset

from .conftest import REPO, assert_jobs_ran_in_the_job_environment, fast_polling

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
DAG_FILE = REPO / "dags" / "mapped_retraining.py"
BUCKET = "adt-demo-bucket"  # the DAG's members read s3://adt-demo-bucket/markets/<member>/train
MEMBERS = ("emea", "apac", "amer")
RUN_CONF = {"backend": "sagemaker"}
SAGEMAKER_RUN = ("choose_backend", "sagemaker", "summary")  # what a backend=sagemaker run runs


@pytest.fixture
def mapped_dag_on_endpoint(
    aws_default_on_endpoint: Any, airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """The shipped DAG, ``aws_default`` pointing at the endpoint (its ``endpoint_url`` extra), the
    demo's folder (holdout evaluation set, run summary) in ``tmp_path``."""
    from airflow_dist_training.compat import DagBag

    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path / "demo"))
    make_dataset(tmp_path / "demo" / "markets" / "holdout", train=64, test=400, seed=99)
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    return fast_polling(bag.dags["mapped_retraining"])


def _upload_market(s3: Any, folder: Path, member: str, seed: int) -> None:
    data = make_dataset(folder / f"{member}-{seed}", train=1000, test=64, seed=seed)
    s3.upload_file(str(data / "train" / "data.csv"), BUCKET, f"markets/{member}/train/data.csv")


def _states(run: Any) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(ti.state) for ti in run.get_task_instances()}


def _packages(sm: Any, member: str) -> list[dict[str, Any]]:
    return list(
        sm.list_model_packages(ModelPackageGroupName=f"market-mlp-{member}")["ModelPackageSummaryList"]
    )


def test_mapped_dag_on_sagemaker_trains_every_member_then_only_the_changed_one(
    mapped_dag_on_endpoint: Any, aws_default_on_endpoint: Any, tmp_path: Path
) -> None:
    dag, endpoint = mapped_dag_on_endpoint, aws_default_on_endpoint
    s3, sm = endpoint.client("s3"), endpoint.client("sagemaker")
    s3.create_bucket(Bucket=BUCKET)
    for seed, member in enumerate(MEMBERS):
        _upload_market(s3, tmp_path / "data", member, seed)

    run = dag.test(run_conf=RUN_CONF)
    states = _states(run)
    assert str(run.state) == "success", states
    # the branch chose the sagemaker group; every other backend's group is skipped
    others = {key: state for key, state in states.items() if key[0].split(".")[0] not in SAGEMAKER_RUN}
    assert others and set(others.values()) == {"skipped"}, others
    for index, member in enumerate(MEMBERS):
        for task in ("plan", "check_changes", "train", "evaluate", "gate", "register"):
            assert states[(f"sagemaker.{task}", index)] == "success", (member, task, states)

    jobs = {j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]}
    assert len(jobs) == 3
    models = {}
    for member in MEMBERS:
        [job] = [j for j in jobs if j.startswith(f"market-mlp-{member}-")]
        desc = sm.describe_training_job(TrainingJobName=job)
        assert desc["TrainingJobStatus"] == "Completed"
        [channel] = [c for c in desc["InputDataConfig"] if c["ChannelName"] == "train"]
        assert channel["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{BUCKET}/markets/{member}/train"
        assert desc["HyperParameters"]["lr"] == ("0.1" if member == "apac" else "0.05")
        assert desc["HyperParameters"]["hidden"] == ("16" if member == "amer" else "32")
        models[member] = desc["ModelArtifacts"]["S3ModelArtifacts"]
        # registered in its own SageMaker model package group, pointing at its own job and model
        [package] = _packages(sm, member)
        detail = sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])
        assert detail["ModelApprovalStatus"] == "Approved"
        assert detail["CustomerMetadataProperties"]["TrainingJobName"] == job
        assert detail["InferenceSpecification"]["Containers"][0]["ModelDataUrl"] == models[member]
    # each member evaluated by its own processing job, on its own model
    processing = [
        sm.describe_processing_job(ProcessingJobName=p["ProcessingJobName"])
        for p in sm.list_processing_jobs()["ProcessingJobSummaries"]
    ]
    assert {p["ProcessingJobStatus"] for p in processing} == {"Completed"}
    assert sorted(p["ProcessingInputs"][0]["S3Input"]["S3Uri"] for p in processing) == sorted(models.values())
    summary = (tmp_path / "demo" / "last-mapped-run-summary.txt").read_text()
    for member in MEMBERS:
        assert f"Member {member}: retraining run summary (sagemaker backend)" in summary
        assert f"model-package/market-mlp-{member}/1 (Approved)" in summary

    # Run 2: new data under apac's S3 prefix only -> apac retrains, emea and amer are skipped
    _upload_market(s3, tmp_path / "data", "apac", seed=7)
    run = dag.test(run_conf=RUN_CONF)
    states = _states(run)
    assert str(run.state) == "success", states
    for index, member in enumerate(MEMBERS):
        expected = "success" if member == "apac" else "skipped"
        for task in ("train", "evaluate", "gate", "register"):
            assert states[(f"sagemaker.{task}", index)] == expected, (member, task, states)
    new_jobs = {j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]} - jobs
    assert len(new_jobs) == 1 and next(iter(new_jobs)).startswith("market-mlp-apac-"), new_jobs
    assert len(sm.list_processing_jobs()["ProcessingJobSummaries"]) == 4
    summary = (tmp_path / "demo" / "last-mapped-run-summary.txt").read_text()
    for member in ("emea", "amer"):
        assert f"SKIPPED: no new data or code since champion market-mlp-{member}/1" in summary
        assert len(_packages(sm, member)) == 1  # no new package for a skipped member
    assert "Why trained         data changed since champion market-mlp-apac/1" in summary
    if "Quality gate        PASSED" in summary:
        assert len(_packages(sm, "apac")) == 2
    else:
        assert len(_packages(sm, "apac")) == 1 and "REJECTED" in summary
    assert_jobs_ran_in_the_job_environment(endpoint)
