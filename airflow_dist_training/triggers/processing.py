"""Deferrable wait for a SageMaker job of any kind in the job-kind table (the evaluation's processing job
among them), with its logs in the task log (through the training trigger's log streamer).

Transient errors are retried with backoff, a Stopped job is not success, ``on_kill`` stops the job.
Events as ``triggers/base.SageMakerJobTrigger``'s.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from airflow_dist_training.aws_errors import error_code
from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.hooks.sagemaker_jobs import snake_case
from airflow_dist_training.job_states import STOPPED_STATES
from airflow_dist_training.retry import call_with_retry
from airflow_dist_training.sagemaker.job_kinds import PROCESSING, SageMakerJobKind, get_job_kind
from airflow_dist_training.triggers.base import SageMakerJobTrigger
from airflow_dist_training.triggers.polling import AsyncClients
from airflow_dist_training.triggers.training import _LogStreamer

PROCESSING_LOG_GROUP = str(PROCESSING.log_group)


class SageMakerJobKindTrigger(SageMakerJobTrigger):
    """Wait for a SageMaker job of any kind in ``sagemaker/job_kinds.py``; stream its logs while waiting.

    One describe per poll (the row's ``describe``), its log group's streams merged by timestamp,
    the row's terminal states. ``DurableJob.trigger`` builds it for a kind without its own trigger.

    :param job_name: the job.
    :param kind: the job kind (a key of the job-kind table; default: the subclass's ``job_kind``).
    :param deadline: POSIX time after which the wait ends with a ``"timeout"`` event (the operator
        then stops the job); ``None`` waits for as long as the job runs.
    :param stream_logs: copy the job's CloudWatch logs into the task log.
    """

    _fields: tuple[str, ...] = ("job_name", "kind")
    _common_fields: tuple[str, ...] = ("aws_conn_id", "region_name", "poll_interval", "deadline", "stream_logs")

    #: The kind a subclass waits for (its ``kind`` argument may then be left out).
    job_kind: str | None = None
    #: The job as messages name it (default: its kind's label, capitalised).
    job_label: str | None = None

    def __init__(
        self,
        job_name: str,
        kind: str | None = None,
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
        self.kind = str(kind or self.job_kind)
        self.stream_logs = stream_logs

    @property
    def row(self) -> SageMakerJobKind:
        return get_job_kind(self.kind)

    @property
    def what(self) -> str:
        return self.job_label or self.row.label.capitalize()

    def progress(self, desc: dict[str, Any]) -> str | None:
        """A kind's progress beyond its status, logged when it changes (default: none)."""
        return None

    def _terminal_event(self, desc: dict[str, Any]) -> TriggerEvent:
        row = self.row
        status = row.status(desc)
        reason = desc.get(row.failure_reason_key) or desc.get("ExitMessage")
        if status in row.success_states:
            return self._event("success", f"{self.what} {self.job_name} completed.", status)
        if status not in STOPPED_STATES:
            why = reason or "no reason given"
            return self._event("failed", f"{self.what} {self.job_name} ended {status}: {why}", status, reason)
        return self._event(
            "stopped", f"{self.what} {self.job_name} was stopped" + (f": {reason}" if reason else "."), status, reason
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        row = self.row
        clients = AsyncClients(self.aws_conn_id, self.region_name)
        streamer = (
            _LogStreamer(self.job_name, clients, self.log.info, log_group=row.log_group)
            if self.stream_logs and row.log_group
            else None
        )
        self.log.info("Waiting for SageMaker %s %s (poll interval %ss).", row.label, self.job_name, self.poll_interval)
        try:
            while True:
                sm = await clients.client("sagemaker")
                try:
                    desc = await call_with_retry(
                        functools.partial(getattr(sm, snake_case(row.describe)), **{row.name_key: self.job_name}),
                        what=row.describe,
                        max_attempts=None,
                        logger=None,
                    )
                except Exception as exc:
                    yield self._watch_error(row.label, exc)
                    return
                status = row.status(desc)
                self.log_change("status", status, "%s %s is %s.", self.what, self.job_name, status)
                progress = self.progress(desc)
                if progress:
                    self.log_change("progress", progress, "%s %s: %s", self.what, self.job_name, progress)
                if streamer is not None:
                    await self.stream_best_effort(streamer, desc, self.job_name)
                if row.is_terminal(desc):
                    yield self._terminal_event(desc)
                    return
                wait = self.next_wait()
                if wait is None:
                    yield self._event(
                        "timeout", f"{self.what} {self.job_name} still {status} at the deadline.", status
                    )
                    return
                await asyncio.sleep(wait)
        finally:
            await clients.aclose()

    async def stop_resource(self) -> None:
        """Stop the job (the user killed the deferred task)."""
        row = self.row
        clients = AsyncClients(self.aws_conn_id, self.region_name)
        try:
            sm = await clients.client("sagemaker")
            await getattr(sm, snake_case(row.stop))(**{row.name_key: self.job_name})
            self.log.info("Requested %s for %s (task killed while deferred).", row.stop, self.job_name)
        except Exception as exc:
            if error_code(exc) != "ValidationException":
                raise
            self.log.info("%s %s was not running: nothing to stop.", self.what, self.job_name)
        finally:
            await clients.aclose()


class ProcessingJobTrigger(SageMakerJobKindTrigger):
    """Wait for the evaluation's SageMaker processing job (``SageMakerJobKindTrigger`` of kind ``processing``)."""

    _fields = ("job_name",)
    job_kind = PROCESSING.kind
    job_label = "Evaluation processing job"
