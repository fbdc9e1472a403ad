"""Managed spot on the SageMaker test endpoint, through the shipped ``distributed_retraining`` DAG.

The run's conf is what a user sets on the trigger form: ``spot`` and its interruption budget
(``spot_max_interruptions``, ``spot_on_demand_after``). The endpoint really runs every job; its
``spot_interruption`` fault reclaims the next spot jobs' capacity right after each writes a complete
checkpoint of its own: the hosts get SageMaker's stop (their checkpoints reach S3) and the job ends
``Stopped`` / ``MaxWaitTimeExceeded``, as AWS reports a spot job whose capacity did not come back.

1. Interrupted twice, each time replaced within the budget by the run's next job, which resumes
   from the run's last complete checkpoint; after the second, the budget for spot is used up and
   the third job runs on on-demand instances (its request has no spot), resumes, and completes.
2. The budget exhausted with no on-demand fallback: the training task fails with the reason.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.retraining.test_retraining_on_emulator import BUCKET, _states, retraining_dag

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
__all__ = ["retraining_dag"]  # the shipped DAG on the endpoint (a fixture)
EPOCHS = 8  # an epoch of 400 rows takes well under a second; the interruptions strike at one of them
CHECKPOINTS = "checkpoints/"


def _requests_sent(out: str) -> dict[str, dict[str, Any]]:
    """The CreateTrainingJob requests as the training task logged them before sending, by job name."""
    decoder = json.JSONDecoder()
    sent = {}
    for match in re.finditer(r"Creating training job (\S+):\n", out):
        sent[match.group(1)] = decoder.raw_decode(out, match.end())[0]
    return sent


def _manifest_steps(s3: Any) -> list[int]:
    """The steps of the complete checkpoints in the endpoint's S3 (``.../step-N/_MANIFEST.json``)."""
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=CHECKPOINTS).get("Contents", [])]
    return sorted(int(m.group(1)) for k in keys if (m := re.search(r"/step-0*(\d+)/_MANIFEST\.json$", k)))


class JobWatch:
    """Beside the DAG run: the complete checkpoints in S3 when each of the run's jobs was created."""

    def __init__(self, endpoint: Any) -> None:
        self.sm, self.s3 = endpoint.client("sagemaker"), endpoint.client("s3")
        self.steps_at_creation: dict[str, list[int]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> JobWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(10)

    def _watch(self) -> None:
        while not self._done.is_set():
            for job in self.sm.list_training_jobs()["TrainingJobSummaries"]:
                if job["TrainingJobName"] not in self.steps_at_creation:
                    self.steps_at_creation[job["TrainingJobName"]] = _manifest_steps(self.s3)
            time.sleep(0.1)


def _jobs(sm: Any) -> list[dict[str, Any]]:
    summaries = sorted(sm.list_training_jobs()["TrainingJobSummaries"], key=lambda j: j["CreationTime"])
    return [sm.describe_training_job(TrainingJobName=j["TrainingJobName"]) for j in summaries]


def _job_log(endpoint: Any, job: str) -> str:
    """One job's CloudWatch log (its own streams: ``<job>/algo-N-<epoch>``), in order."""
    logs = endpoint.client("logs")
    group = "/aws/sagemaker/TrainingJobs"
    streams = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=f"{job}/")["logStreams"]
    return "\n".join(
        e["message"]
        for s in streams
        for e in logs.get_log_events(
            logGroupName=group, logStreamName=s["logStreamName"], startFromHead=True
        )["events"]
    )


def _resumed_step(log: str) -> int:
    resumed = re.search(r"resumed from this run's checkpoint step-0*(\d+) \(epoch=\d+(?:, batch \d+ of \d+)?\)", log)
    assert resumed is not None, log[-2000:]
    return int(resumed.group(1))


def _upload_data(endpoint: Any, tmp_path: Path) -> None:
    s3 = endpoint.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(tmp_path / "source" / "train" / "data.csv"), BUCKET, "data/train/data.csv")


def test_spot_run_interrupted_twice_resumes_then_falls_back_to_on_demand(
    sagemaker_endpoint: Any, retraining_dag: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    endpoint = sagemaker_endpoint
    sm = endpoint.client("sagemaker")
    _upload_data(endpoint, tmp_path)
    endpoint.inject("spot_interruption", count=2)
    conf = {
        "backend": "sagemaker",
        "epochs": EPOCHS,
        "spot": True,
        "spot_max_interruptions": 2,
        "spot_on_demand_after": 2,
    }
    capfd.readouterr()
    with JobWatch(endpoint) as watch:
        run = retraining_dag.test(run_conf=conf)
    out = capfd.readouterr().out
    states = _states(run)
    assert str(run.state) == "success", states
    [train] = [ti for ti in run.get_task_instances() if ti.task_id == "sagemaker.train"]
    assert train.state == "success" and train.try_number == 1  # interruptions use no Airflow retry
    first, second, third = jobs = _jobs(sm)
    names = [j["TrainingJobName"] for j in jobs]
    for interrupted in (first, second):
        assert (interrupted["TrainingJobStatus"], interrupted["SecondaryStatus"]) == (
            "Stopped",
            "MaxWaitTimeExceeded",
        )
        assert "Spot instance interruption" in interrupted["FailureReason"]
        assert [t["Status"] for t in interrupted["SecondaryStatusTransitions"]][-2:] == [
            "Interrupted",
            "MaxWaitTimeExceeded",
        ]
    assert third["TrainingJobStatus"] == "Completed"
    # the requests as sent: spot with MaxWait for the first two, on-demand for the fallback
    sent = _requests_sent(out)
    assert list(sent) == names
    for name in names[:2]:
        assert sent[name]["EnableManagedSpotTraining"] is True
        assert sent[name]["StoppingCondition"]["MaxWaitTimeInSeconds"] == 7200
    assert "EnableManagedSpotTraining" not in sent[names[2]]
    assert "MaxWaitTimeInSeconds" not in sent[names[2]]["StoppingCondition"]
    assert not third.get("EnableManagedSpotTraining")
    assert (
        "2 spot interruptions in this run (spot.on_demand_after_interruptions=2): "
        "the next job runs on on-demand instances." in out
    )
    # each replacement resumed from the run's last complete checkpoint when it was created
    checkpoint_uri = third["CheckpointConfig"]["S3Uri"].rstrip("/")
    assert first["CheckpointConfig"]["S3Uri"].rstrip("/") == checkpoint_uri
    for job in (second, third):
        steps = watch.steps_at_creation[job["TrainingJobName"]]
        assert steps, f"no complete checkpoint in S3 when {job['TrainingJobName']} was created"
        assert _resumed_step(_job_log(endpoint, job["TrainingJobName"])) == steps[-1]
    resumed_third = _resumed_step(_job_log(endpoint, names[2]))
    assert resumed_third > _resumed_step(_job_log(endpoint, names[1]))  # the second job trained on
    log3 = _job_log(endpoint, names[2])
    assert f"run_summary epochs_trained={EPOCHS} " in log3
    # billing as SageMaker reports it: the spot jobs' saving, none for the on-demand one
    for spot_job in (first, second):
        assert spot_job["BillableTimeInSeconds"] < max(spot_job["TrainingTimeInSeconds"], 2)
    assert third["BillableTimeInSeconds"] == third["TrainingTimeInSeconds"]


def test_spot_run_past_its_interruption_budget_fails_with_the_reason(
    sagemaker_endpoint: Any, retraining_dag: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    endpoint = sagemaker_endpoint
    sm = endpoint.client("sagemaker")
    _upload_data(endpoint, tmp_path)
    endpoint.inject("spot_interruption", count=1)
    capfd.readouterr()
    run = retraining_dag.test(
        run_conf={"backend": "sagemaker", "epochs": EPOCHS, "spot": True, "spot_max_interruptions": 0}
    )
    out = capfd.readouterr().out
    states = _states(run)
    assert str(run.state) == "failed", states
    [train] = [ti for ti in run.get_task_instances() if ti.task_id == "sagemaker.train"]
    assert train.state == "failed" and train.try_number == 1  # no retry: another try would not help
    for task in ("evaluate", "gate", "register"):
        assert states[f"sagemaker.{task}"] != "success", (task, states)
    [job] = _jobs(sm)
    assert (job["TrainingJobStatus"], job["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    # what the user reads in the task log: why no other job was created, and what to change
    assert (
        "Not creating another training job for this run: interruption budget exhausted: "
        "1 interruption > max_interruptions=0 (spot.max_interruptions). "
        "Raise the budget, or set spot.on_demand_after_interruptions." in out
    ), out[-3000:]
    # what the interrupted job checkpointed is in S3 for a later run's resume (the stop's sync)
    assert _manifest_steps(endpoint.client("s3"))
