"""Deferrable wait for a SageMaker processing job (the evaluation job), with its logs in the task log.

The evaluation operator starts the processing job and defers to this trigger, so the wait holds no
worker slot. While it waits, the job's CloudWatch logs (``/aws/sagemaker/ProcessingJobs``, one
stream per host, merged by timestamp) go to the task log, through the same log streamer as the
training trigger. Transient errors (throttling, 5xx, network) are retried with backoff
(``retry.call_with_retry``); a Stopped job is not success; ``on_kill``
stops the job.

Event payload::

    {"status": "success" | "failed" | "stopped" | "timeout" | "error", "job_name": str,
     "job_status": str | None, "failure_reason": str | None, "message": str}
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from airflow_dist_training.aws_errors import error_code
from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.job_states import TERMINAL_STATES
from airflow_dist_training.retry import call_with_retry
from airflow_dist_training.triggers.base import SageMakerJobTrigger
from airflow_dist_training.triggers.polling import AsyncClients
from airflow_dist_training.triggers.training import _LogStreamer

PROCESSING_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"


class ProcessingJobTrigger(SageMakerJobTrigger):
    """Wait for a SageMaker processing job; stream its logs while waiting.

    :param job_name: the processing job.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region (default: the connection's).
    :param poll_interval: seconds between ``DescribeProcessingJob`` calls.
    :param deadline: POSIX time after which the wait ends with a ``"timeout"`` event (the operator
        then stops the job); ``None`` waits for as long as the job runs.
    :param stream_logs: copy the job's CloudWatch logs into the task log.
    """

    _fields = ("job_name",)
    _common_fields = ("aws_conn_id", "region_name", "poll_interval", "deadline", "stream_logs")

    def __init__(
        self,
        job_name: str,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        poll_interval: float = 30,
        deadline: float | None = None,
        stream_logs: bool = True,
    ) -> None:
        super().__init__(
            poll_interval=poll_interval, deadline=deadline, aws_conn_id=aws_conn_id, region_name=region_name
        )
        self.job_name = job_name
        self.stream_logs = stream_logs

    def _terminal_event(self, desc: dict[str, Any]) -> TriggerEvent:
        status = desc.get("ProcessingJobStatus")
        reason = desc.get("FailureReason") or desc.get("ExitMessage")
        if status == "Completed":
            return self._event("success", f"Processing job {self.job_name} completed.", status)
        if status == "Failed":
            return self._event(
                "failed",
                f"Evaluation processing job {self.job_name} ended Failed: {reason or 'no reason given'}",
                status,
                reason,
            )
        return self._event(
            "stopped",
            f"Evaluation processing job {self.job_name} was stopped" + (f": {reason}" if reason else "."),
            status,
            reason,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        clients = AsyncClients(self.aws_conn_id, self.region_name)
        streamer = (
            _LogStreamer(self.job_name, clients, self.log.info, log_group=PROCESSING_LOG_GROUP)
            if self.stream_logs
            else None
        )
        self.log.info(
            "Waiting for SageMaker processing job %s (poll interval %ss).", self.job_name, self.poll_interval
        )
        try:
            while True:
                sm = await clients.client("sagemaker")
                try:
                    desc = await call_with_retry(
                        functools.partial(sm.describe_processing_job, ProcessingJobName=self.job_name),
                        what="DescribeProcessingJob",
                        max_attempts=None,
                        logger=None,
                    )
                except Exception as exc:
                    code = error_code(exc)
                    yield self._event(
                        "error",
                        f"Cannot watch processing job {self.job_name}: {code + ': ' if code else ''}{exc}",
                    )
                    return
                status = str(desc.get("ProcessingJobStatus"))
                self.log_change("status", status, "Processing job %s is %s.", self.job_name, status)
                if streamer is not None:
                    await self.stream_best_effort(streamer, desc, self.job_name)
                if status in TERMINAL_STATES:
                    yield self._terminal_event(desc)
                    return
                wait = self.next_wait()
                if wait is None:
                    yield self._event(
                        "timeout", f"Processing job {self.job_name} still {status} at the deadline.", status
                    )
                    return
                await asyncio.sleep(wait)
        finally:
            await clients.aclose()

    async def stop_resource(self) -> None:
        """Stop the processing job (the user killed the deferred task)."""
        clients = AsyncClients(self.aws_conn_id, self.region_name)
        try:
            sm = await clients.client("sagemaker")
            await sm.stop_processing_job(ProcessingJobName=self.job_name)
            self.log.info("Requested StopProcessingJob for %s (task killed while deferred).", self.job_name)
        except Exception as exc:
            if error_code(exc) != "ValidationException":
                raise
            self.log.info("Processing job %s was not running: nothing to stop.", self.job_name)
        finally:
            await clients.aclose()
