"""Deferrable wait for a SageMaker hyperparameter tuning job (``SageMakerJobKindTrigger`` of kind ``tuning``).

One ``DescribeHyperParameterTuningJob`` per poll, as the other job kinds: a tuning job of N
training jobs costs the triggerer the same calls as one job. The task log shows the training
jobs' progress (``TrainingJobStatusCounters``) and the best objective so far when they change.
A tuning job writes no logs of its own (its training jobs do). ``on_kill`` stops the tuning job,
which stops its running training jobs. Events as ``SageMakerJobKindTrigger``'s.
"""

from __future__ import annotations

from typing import Any

from airflow_dist_training.sagemaker.job_kinds import TUNING
from airflow_dist_training.triggers.processing import SageMakerJobKindTrigger

_COUNTER_WORDS = {
    "Completed": "completed",
    "InProgress": "in progress",
    "RetryableError": "failed (retryable)",
    "NonRetryableError": "failed",
    "Stopped": "stopped",
}


def tuning_progress(desc: dict[str, Any]) -> str | None:
    """``"training jobs: 2 completed, 2 in progress; best: <job> validation:acc=0.93"``, or None."""
    counters = desc.get("TrainingJobStatusCounters") or {}
    parts = [f"{n} {_COUNTER_WORDS.get(key, key)}" for key, n in counters.items() if n]
    if not parts:
        return None
    text = "training jobs: " + ", ".join(parts)
    best = desc.get("BestTrainingJob") or {}
    metric = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    if best.get("TrainingJobName") and "Value" in metric:
        text += f"; best: {best['TrainingJobName']} {metric.get('MetricName')}={metric['Value']:g}"
    return text


class TuningJobTrigger(SageMakerJobKindTrigger):
    """Wait for a hyperparameter tuning job; log its training jobs' progress while waiting."""

    _fields = ("job_name",)
    _common_fields: tuple[str, ...] = ("aws_conn_id", "region_name", "poll_interval", "deadline")
    job_kind = TUNING.kind  # no log group of its own: nothing to stream
    job_label = "Hyperparameter tuning job"

    def progress(self, desc: dict[str, Any]) -> str | None:
        return tuning_progress(desc)
