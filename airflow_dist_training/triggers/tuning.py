"""Deferrable wait for a SageMaker hyperparameter tuning job, through the shared poller.

Status comes from the poller of tuning jobs (``triggers/polling.py``): one
``ListHyperParameterTuningJobs`` page per poll for every tuning job this triggerer watches, and a
describe only when one changed (a training job started or ended, the status moved), so a tuning
job of N training jobs costs the triggerer about what one training job costs (``bench/trigger_polling.py``).
The task log shows the training jobs' progress (``TrainingJobStatusCounters``) and the best
objective so far when they change. A tuning job writes no logs of its own (its training jobs do).
``on_kill`` stops the tuning job, which stops its running training jobs. Events as
``SageMakerJobKindTrigger``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.sagemaker.job_kinds import TUNING
from airflow_dist_training.triggers.polling import get_poller
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

    async def run(self) -> AsyncIterator[TriggerEvent]:
        row = self.row
        poller = get_poller(self.aws_conn_id, self.region_name, row.kind)
        watch = poller.subscribe(self.job_name, float(self.poll_interval))  # details: the best job so far
        self.log.info("Waiting for SageMaker %s %s (poll interval %ss).", row.label, self.job_name, self.poll_interval)
        try:
            while True:
                if watch.error is not None:
                    yield self._watch_error(row.label, watch.error)
                    return
                desc = watch.description
                wait = self.next_wait()
                if desc is not None:
                    status = row.status(desc)
                    self.log_change("status", status, "%s %s is %s.", self.what, self.job_name, status)
                    progress = self.progress(desc)
                    if progress:
                        self.log_change("progress", progress, "%s %s: %s", self.what, self.job_name, progress)
                    if row.is_terminal(desc):
                        yield self._terminal_event(desc)
                        return
                    if wait is None:  # a job seen ending at the deadline is not timed out
                        yield self._event(
                            "timeout", f"{self.what} {self.job_name} still {status} at the deadline.", status
                        )
                        return
                await watch.wait(float(self.poll_interval) if wait is None else wait)
        finally:
            poller.unsubscribe(watch)
