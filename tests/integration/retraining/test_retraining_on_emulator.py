"""The retraining scenario (issue 13) on the SageMaker backend, through the SageMaker test endpoint.

The shipped ``distributed_retraining`` DAG with ``backend=sagemaker``, three DAG runs in a row
against one endpoint (its S3, its model registry):

1. new data: trains all its epochs, passes the gate, registers ``adt-demo/1`` with its lineage in
   the package's ``CustomerMetadataProperties``;
2. the same data, code and spec: skipped with the reason; no training job, no package, no checkpoint;
   then a new hold-out set alone: no training job, one processing job evaluates v1's model and the
   result is recorded on v1's package; the next check skips again;
3. new data (the generator with another seed) and ``warm_start: champion``: the champion's model
   arrives as the ``warm_start`` channel. The run's first job loses its instance right after its
   first checkpoint (the endpoint's ``host_failure`` fault); the task's retry starts the run's next
   job, which resumes from run 3's own checkpoint (never run 1's); the run trains all its epochs,
   and the package records the champion it was compared with.

Everything is asserted from the endpoint's state (jobs, requests, logs, packages, S3).
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.datasets import make_dataset
from tests.paths import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
DAG_FILE = REPO / "dags" / "distributed_retraining.py"
BUCKET = "adt-demo-bucket"
EPOCHS = 3  # the gate needs accuracy >= 0.8; an epoch of 400 rows costs well under a second


def _make_data(out: Path, seed: int) -> None:
    make_dataset(out, train=400, test=200, seed=seed)


@pytest.fixture
def retraining_dag(
    sagemaker_endpoint: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: Path
) -> Any:
    from airflow_dist_training.compat import DagBag

    _make_data(tmp_path / "source", seed=0)
    monkeypatch.setenv("ADT_DEMO_DIR", str(tmp_path))
    bag = DagBag(dag_folder=str(DAG_FILE), safe_mode=False)
    assert bag.import_errors == {}
    dag = bag.dags["distributed_retraining"]
    for task in dag.tasks:  # the endpoint's jobs are tiny: poll every second, not every 30
        if hasattr(task, "poll_interval"):
            task.poll_interval = 1.0
        if hasattr(task, "job_wait_seconds"):  # dag.test has no scheduler to race (the stall watcher)
            task.job_wait_seconds = 1.0
    return dag


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def _job_log(endpoint: Any, job: str) -> str:
    events = endpoint.client("logs").filter_log_events(
        logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix=f"{job}/algo-1"
    )["events"]
    return "".join(e["message"] for e in events)


def _packages(sm: Any) -> list[dict[str, Any]]:
    found = sm.list_model_packages(ModelPackageGroupName="adt-demo")["ModelPackageSummaryList"]
    details = [sm.describe_model_package(ModelPackageName=p["ModelPackageArn"]) for p in found]
    return sorted(details, key=lambda d: d["ModelPackageVersion"])


def test_retraining_scenario_on_the_sagemaker_backend(
    sagemaker_endpoint: Any, retraining_dag: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    endpoint = sagemaker_endpoint
    s3 = endpoint.client("s3")
    sm = endpoint.client("sagemaker")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(tmp_path / "source" / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    conf = {"backend": "sagemaker", "epochs": EPOCHS}

    # Run 1: trains all its epochs, passes the gate, registers v1 with its lineage.
    run1 = retraining_dag.test(run_conf=conf)
    states = _states(run1)
    assert str(run1.state) == "success", states
    for task in ("check_changes", "train", "evaluate", "gate", "register"):
        assert states[f"sagemaker.{task}"] == "success", (task, states)
    [job1] = sm.list_training_jobs()["TrainingJobSummaries"]
    log1 = _job_log(endpoint, job1["TrainingJobName"])
    assert "no checkpoint found: starting from scratch" in log1
    assert f"run_summary epochs_trained={EPOCHS} " in log1 and "warm_started=0" in log1
    [v1] = _packages(sm)
    assert v1["ModelApprovalStatus"] == "Approved"
    meta1 = v1["CustomerMetadataProperties"]
    assert meta1["TrainingJobName"] == job1["TrainingJobName"]
    assert meta1["AirflowRunId"] == run1.run_id and meta1["AirflowDagId"] == "distributed_retraining"
    assert meta1["DataFingerprint"].startswith("sha256:") and meta1["CodeHash"].startswith("sha256:")
    assert meta1["GateDecision"] == "passed" and "ChampionComparedWith" not in meta1
    checkpoints = {
        o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="checkpoints/").get("Contents", [])
    }
    assert checkpoints  # run 1's job synced its checkpoints to S3

    # Run 2: same data, code and spec -> skipped with the reason; no job, no version, no checkpoint.
    run2 = retraining_dag.test(run_conf=conf)
    states = _states(run2)
    assert str(run2.state) == "success", states
    assert states["sagemaker.check_changes"] == "success"
    for task in ("train", "evaluate", "gate", "register"):
        assert states[f"sagemaker.{task}"] == "skipped", (task, states)
    summary = (tmp_path / "last-run-summary.txt").read_text()
    fingerprint = meta1["DataFingerprint"][7:19]
    assert (
        f"SKIPPED: no new data or code since champion adt-demo/1 (data fingerprint {fingerprint}" in summary
    )
    assert len(sm.list_training_jobs()["TrainingJobSummaries"]) == 1
    assert len(_packages(sm)) == 1
    after2 = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="checkpoints/").get("Contents", [])}
    assert after2 == checkpoints

    # Run 2b: a new hold-out set alone -> no training job: one processing job evaluates v1's model,
    # recorded on v1's package (no new package, still approved); the next run skips again.
    _make_data(tmp_path / "hold-out", seed=3)
    (tmp_path / "source" / "test" / "data.csv").write_bytes(
        (tmp_path / "hold-out" / "test" / "data.csv").read_bytes()
    )
    champion_model = v1["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    [evaluation1] = sm.list_processing_jobs()["ProcessingJobSummaries"]
    run2b = retraining_dag.test(run_conf=conf)
    states = _states(run2b)
    assert str(run2b.state) == "success", states
    assert states["sagemaker.reevaluate"] == states["sagemaker.record_evaluation"] == "success", states
    for task in ("train", "evaluate", "gate", "register", "watch_checkpoints"):
        assert states[f"sagemaker.{task}"] == "skipped", (task, states)
    assert len(sm.list_training_jobs()["TrainingJobSummaries"]) == 1
    processing = sm.list_processing_jobs()["ProcessingJobSummaries"]
    [evaluation2] = [p for p in processing if p["ProcessingJobName"] != evaluation1["ProcessingJobName"]]
    inputs = sm.describe_processing_job(ProcessingJobName=evaluation2["ProcessingJobName"])[
        "ProcessingInputs"
    ]
    assert champion_model in {i["S3Input"]["S3Uri"] for i in inputs}  # v1's model, evaluated again
    [v1_after] = _packages(sm)
    meta = v1_after["CustomerMetadataProperties"]
    assert v1_after["ModelApprovalStatus"] == "Approved" and meta["ReevaluatedByRun"] == run2b.run_id
    assert meta["EvaluationFingerprint"] != meta1["EvaluationFingerprint"]
    assert (
        meta["CurrentEvaluation"].startswith(f"s3://{BUCKET}/")
        and meta["DataFingerprint"] == meta1["DataFingerprint"]
    )
    summary = (tmp_path / "last-run-summary.txt").read_text()
    assert (
        "RE-EVALUATED: evaluation changed since champion adt-demo/1: re-evaluating adt-demo/1 without "
        f"retraining (its model {champion_model} is still there)" in summary
    )
    run2c = retraining_dag.partial_subset(task_ids=["sagemaker.check_changes"], include_upstream=True)
    capfd.readouterr()
    run2c.test(run_conf=conf)
    assert "no new data or code since champion adt-demo/1" in capfd.readouterr().out

    # Run 3: new data arrives; warm start from the champion. Its first job's instance fails after
    # the job's first checkpoint; the task's retry resumes from run 3's own checkpoint.
    _make_data(tmp_path / "new", seed=7)
    s3.upload_file(str(tmp_path / "new" / "train" / "data.csv"), BUCKET, "data/train/data.csv")
    endpoint.inject("host_failure", count=1)
    retraining_dag.get_task("sagemaker.train").retry_delay = timedelta(seconds=0)
    capfd.readouterr()
    run3 = retraining_dag.test(run_conf={**conf, "warm_start": "champion"})
    out = capfd.readouterr().out
    states = _states(run3)
    assert str(run3.state) == "success", states
    assert states["sagemaker.train"] == states["sagemaker.gate"] == "success", states
    [train_ti] = [ti for ti in run3.get_task_instances() if ti.task_id == "sagemaker.train"]
    assert train_ti.try_number == 2  # a real Airflow retry of the task
    jobs = sm.list_training_jobs()["TrainingJobSummaries"]
    assert len(jobs) == 3  # run 1's, and one per attempt of run 3's task: no duplicate
    failed, job3 = sorted(
        (j for j in jobs if j["TrainingJobName"] != job1["TrainingJobName"]), key=lambda j: j["CreationTime"]
    )
    desc_failed = sm.describe_training_job(TrainingJobName=failed["TrainingJobName"])
    assert desc_failed["TrainingJobStatus"] == "Failed"
    assert desc_failed["FailureReason"].startswith("InternalServerError: ")
    reason = desc_failed["FailureReason"]
    assert (
        f"This run's earlier job {failed['TrainingJobName']} ended Failed ({reason}) (failed); starting generation 2."
        in out
    )
    desc3 = sm.describe_training_job(TrainingJobName=job3["TrainingJobName"])
    assert desc3["TrainingJobStatus"] == "Completed"
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in desc3["InputDataConfig"]}
    assert channels["warm_start"] == champion_model  # the champion's model, as an input channel
    run3_checkpoints = desc3["CheckpointConfig"]["S3Uri"]
    run1_checkpoints = sm.describe_training_job(TrainingJobName=job1["TrainingJobName"])["CheckpointConfig"][
        "S3Uri"
    ]
    assert desc_failed["CheckpointConfig"]["S3Uri"] == run3_checkpoints != run1_checkpoints
    # the retry resumed from run 3's own checkpoint, which the failed job wrote; never run 1's
    [resuming] = [line for line in out.splitlines() if "Resuming from this run's own checkpoint" in line]
    assert f"{run3_checkpoints.rstrip('/')}/step-" in resuming and run1_checkpoints not in resuming
    log_failed = _job_log(endpoint, failed["TrainingJobName"])
    assert "warm start: initialised from " in log_failed and f"training all {EPOCHS} epochs" in log_failed
    # the instance fails at once, right after its first checkpoint: what it printed in its last
    # milliseconds may not reach CloudWatch (as on a lost instance); the checkpoint it wrote is what
    # the retry resumed from (above), and the reason names the instance (the endpoint's own log has
    # the executor's account, not the job's log)
    assert "the instance of algo-1 failed" in reason
    log3 = _job_log(endpoint, job3["TrainingJobName"])
    resumed = re.search(
        r"resumed from this run's checkpoint step-\d+ \(epoch=(\d+)\), starting at epoch=(\d+)", log3
    )
    assert resumed is not None, log3[-2000:]
    done = int(resumed.group(2))
    assert done == int(resumed.group(1)) + 1 and done <= EPOCHS
    assert f"run_summary epochs_trained={EPOCHS} " in log3 and f"job_epochs={EPOCHS - done} " in log3
    summary = (tmp_path / "last-run-summary.txt").read_text()
    assert "data and spec changed since champion adt-demo/1: training" in summary
    assert f"PASS training: the training job trained {EPOCHS} epochs" in summary
    assert (
        "model artifact differs from champion arn:aws:sagemaker:us-east-1:123456789012:model-package/adt-demo/1"
        in summary
    )
    packages = _packages(sm)
    if "Quality gate        PASSED" in summary:
        assert (
            "no regression vs champion arn:aws:sagemaker:us-east-1:123456789012:model-package/adt-demo/1"
            in summary
        )
        assert [p["ModelPackageVersion"] for p in packages] == [1, 2]
        meta2 = packages[1]["CustomerMetadataProperties"]
        assert meta2["ChampionComparedWith"] == v1["ModelPackageArn"]
        assert meta2["DataFingerprint"] != meta1["DataFingerprint"]
        assert meta2["TrainingJobName"] == job3["TrainingJobName"]
    else:
        assert len(packages) == 1 and "REJECTED" in summary
