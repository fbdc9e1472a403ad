"""Deferrable checkpoint-freshness watch of a running SageMaker training job.

The watcher task of ``stage_train_evaluate`` (``CheckpointStallAlarmOperator``) defers here while the
training task waits for the same job: the job's status comes from the shared poller
(``triggers/polling.py``: one subscription more on a job already watched costs no extra call), and
each poll reads the newest complete checkpoint under the job's checkpoint location (the layout's
few S3 requests, in a thread). The watch never touches the job: its ``on_kill`` leaves it running
(``AwsWaitTrigger.stop_resource`` is not overridden); a stop on a stall is the task's decision.

Event payload: ``SageMakerJobTrigger``'s fields, ``status`` being ``"stalled"`` (no new complete
checkpoint for ``max_age_seconds``), ``"ended"`` (the job reached a terminal state first) or
``"error"``, plus ``freshness`` (``Freshness.to_xcom()``, None before the job trained).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow_dist_training.checkpoints.freshness import Freshness, job_freshness
from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.job_states import TERMINAL_STATES
from airflow_dist_training.triggers.base import SageMakerJobTrigger
from airflow_dist_training.triggers.polling import JobWatch, get_poller


class CheckpointFreshnessTrigger(SageMakerJobTrigger):
    """Watch ``job_name``'s checkpoints until the job ends or stalls.

    :param job_name: the running training job.
    :param checkpoint_uri: its checkpoint location (``CheckpointConfig.S3Uri``).
    :param max_age_seconds: longest time without a new complete checkpoint, counted from the job's
        ``TrainingStartTime``.
    :param on_stall: ``alarm`` or ``stop``: carried into the message (the task acts on it).
    :param checkpoint_layout: the layout the script writes (``auto`` detects it).
    :param step_pattern: the ``single-file`` layout's file name pattern.
    :param poll_interval: seconds between checks.
    """

    _fields = (
        "job_name",
        "checkpoint_uri",
        "max_age_seconds",
        "on_stall",
        "checkpoint_layout",
        "step_pattern",
    )
    _common_fields = ("aws_conn_id", "region_name", "poll_interval")

    def __init__(
        self,
        job_name: str,
        checkpoint_uri: str,
        max_age_seconds: float,
        on_stall: str = "alarm",
        checkpoint_layout: str = "auto",
        step_pattern: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        poll_interval: float = 30,
    ) -> None:
        super().__init__(poll_interval=poll_interval, aws_conn_id=aws_conn_id, region_name=region_name)
        self.job_name = job_name
        self.checkpoint_uri = checkpoint_uri
        self.max_age_seconds = max_age_seconds
        self.on_stall = on_stall
        self.checkpoint_layout = checkpoint_layout
        self.step_pattern = step_pattern
        self._hook: Any = None

    def _latest(self) -> Any:
        """The newest complete checkpoint (sync S3 reads: called in a thread)."""
        if self._hook is None:
            from airflow_dist_training.hooks.checkpoints import CheckpointHook

            self._hook = CheckpointHook(
                aws_conn_id=self.aws_conn_id,
                region_name=self.region_name,
                layout=self.checkpoint_layout,
                step_pattern=self.step_pattern,
            )
        return self._hook.latest_complete(self.checkpoint_uri)

    def _freshness(self, desc: dict[str, Any], info: Any) -> Freshness | None:
        return job_freshness(
            desc,
            root=self.checkpoint_uri,
            now=time.time(),
            max_age_seconds=float(self.max_age_seconds),
            latest_modified=info.manifest_modified if info else None,
            latest_uri=info.uri if info else None,
            latest_step=info.step if info else None,
        )

    def _watch_event(
        self, status: str, message: str, desc: dict[str, Any], fresh: Freshness | None
    ) -> TriggerEvent:
        event = self._event(status, message, desc.get("TrainingJobStatus"), desc.get("FailureReason"))
        return TriggerEvent({**event.payload, "freshness": fresh.to_xcom() if fresh else None})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        poller = get_poller(self.aws_conn_id, self.region_name)
        # details: TrainingStartTime is in the describe, not in a listing's summary
        watch: JobWatch = poller.subscribe(self.job_name, float(self.poll_interval), details=True)
        self.log.info(
            "Watching the checkpoints of %s under %s: alarm after %ss without a new complete one (on_stall=%s).",
            self.job_name,
            self.checkpoint_uri,
            self.max_age_seconds,
            self.on_stall,
        )
        fresh: Freshness | None = None
        try:
            while True:
                if watch.error is not None:
                    yield self._watch_error("training job", watch.error)
                    return
                desc = watch.description
                if desc is not None:
                    status = desc.get("TrainingJobStatus")
                    if status in TERMINAL_STATES:
                        yield self._watch_event(
                            "ended", f"Training job {self.job_name} is {status}: the watch ends.", desc, fresh
                        )
                        return
                    try:
                        info = await asyncio.to_thread(self._latest)
                    except Exception as exc:  # a read that failed: the next poll reads again
                        self.log.warning(
                            "Could not read the checkpoints under %s: %s", self.checkpoint_uri, exc
                        )
                    else:
                        fresh = self._freshness(desc, info)
                    if fresh is not None:
                        self.log_change(
                            "step", fresh.step, "Checkpoints of %s: %s", self.job_name, fresh.message
                        )
                        if fresh.stale:
                            yield self._watch_event(
                                "stalled", fresh.stall_alarm(self.job_name, self.on_stall), desc, fresh
                            )
                            return
                await watch.wait(float(self.poll_interval))
        finally:
            poller.unsubscribe(watch)
