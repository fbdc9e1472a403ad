"""The tuning job kind's row and its trigger (serialisation, progress lines)."""

from __future__ import annotations

from airflow_dist_training.hooks.sagemaker_jobs import DurableJob
from airflow_dist_training.sagemaker.job_kinds import TUNING, get_job_kind
from airflow_dist_training.triggers.tuning import TuningJobTrigger, tuning_progress


def test_the_row_names_the_tuning_api() -> None:
    assert get_job_kind("tuning") is TUNING
    assert (TUNING.create, TUNING.describe, TUNING.stop, TUNING.list) == (
        "CreateHyperParameterTuningJob",
        "DescribeHyperParameterTuningJob",
        "StopHyperParameterTuningJob",
        "ListHyperParameterTuningJobs",
    )
    assert (TUNING.name_key, TUNING.status_key, TUNING.arn_resource) == (
        "HyperParameterTuningJobName",
        "HyperParameterTuningJobStatus",
        "hyper-parameter-tuning-job",
    )
    assert TUNING.log_group is None and TUNING.label == "hyperparameter tuning job"


def test_durable_job_builds_the_tuning_trigger_and_it_round_trips() -> None:
    trigger = DurableJob(object(), TUNING).trigger(  # type: ignore[arg-type]
        "tune-abc", aws_conn_id=None, region_name="us-east-1", poll_interval=5, deadline=None
    )
    assert isinstance(trigger, TuningJobTrigger)
    path, kwargs = trigger.serialize()
    assert path == "airflow_dist_training.triggers.tuning.TuningJobTrigger"
    assert kwargs == {
        "job_name": "tune-abc",
        "aws_conn_id": None,
        "region_name": "us-east-1",
        "poll_interval": 5,
        "deadline": None,
    }
    assert TuningJobTrigger(**kwargs).serialize() == (path, kwargs)


def test_progress_reports_counters_and_the_best_objective() -> None:
    assert tuning_progress({"TrainingJobStatusCounters": {"Completed": 0, "InProgress": 0}}) is None
    desc = {
        "TrainingJobStatusCounters": {"Completed": 2, "InProgress": 2, "NonRetryableError": 1, "Stopped": 0},
        "BestTrainingJob": {
            "TrainingJobName": "tune-abc-002-1234abcd",
            "FinalHyperParameterTuningJobObjectiveMetric": {"MetricName": "acc", "Value": 0.93},
        },
    }
    assert tuning_progress(desc) == (
        "training jobs: 2 completed, 2 in progress, 1 failed; best: tune-abc-002-1234abcd acc=0.93"
    )
