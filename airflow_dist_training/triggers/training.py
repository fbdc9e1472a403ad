"""Deferrable wait for a SageMaker training job, with its logs and status timeline in the task log.

Unlike the Amazon provider's ``SageMakerTrigger``: no silent cap, Stopped is not success, and
``on_kill`` stops the job only when the task will not come back for it, and ``cleanup`` never does
(it also runs on triggerer restarts); status comes
from the shared poller (``triggers/polling.py``). The whole behaviour: ``docs/polling.md``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.job_states import STOPPED_STATES, SUCCESS_STATES, TERMINAL_STATES
from airflow_dist_training.retry import call_with_retry
from airflow_dist_training.sagemaker.job_kinds import TRAINING
from airflow_dist_training.sagemaker.log_tail import LogTail, tail_async
from airflow_dist_training.triggers.base import SageMakerJobTrigger
from airflow_dist_training.triggers.polling import JobWatch, TrainingJobPoller, get_poller

#: SecondaryStatus values during which the job's containers may be writing logs.
STREAMING_SECONDARY = frozenset(
    {"Downloading", "DownloadingTrainingImage", "Training", "Uploading", "Stopping", "Restarting"}
)
#: The job's last log lines the terminal event carries to the task, each cut to LAST_LINE_CHARS.
LAST_LINES = 5
LAST_LINE_CHARS = 500
#: Terminal SecondaryStatus values that are failures whatever TrainingJobStatus says.
FAILED_SECONDARY = frozenset({"MaxRuntimeExceeded", "MaxWaitTimeExceeded"})


def _fmt_time(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return "" if value is None else str(value)


def _expected_hosts(description: dict[str, Any]) -> int:
    rc = description.get("ResourceConfig") or {}
    groups = rc.get("InstanceGroups") or []
    if groups:
        return sum(int(g.get("InstanceCount", 0)) for g in groups) or 1
    return int(rc.get("InstanceCount") or 1)


class _LogStreamer:
    """Tails ``/aws/sagemaker/TrainingJobs/<job_name>/*`` across all hosts, merged by timestamp:
    the async driver of ``sagemaker/log_tail.LogTail`` (the hook drives the same tail sync)."""

    def __init__(
        self, job_name: str, poller: TrainingJobPoller | Any, emit: Any, log_group: str = str(TRAINING.log_group)
    ) -> None:
        self.poller = poller  # anything with ``async client("logs")``
        self.emit = emit
        self.tail = LogTail(job_name, log_group)
        # handed to the task in the terminal event: a triggerer may drop a trigger's final log
        # lines (apache/airflow#66158), and the task's own log then still ends with the job's
        self.last_lines: deque[str] = deque(maxlen=LAST_LINES)

    async def fetch(self, description: dict[str, Any]) -> int:
        """Emit every log line written since the previous fetch; returns the number of lines."""
        client = await self.poller.client("logs")

        async def call(operation: str, resource: str, kwargs: dict[str, Any]) -> Any:
            method = getattr(client, "describe_log_streams" if operation == "DescribeLogStreams" else "get_log_events")
            return await call_with_retry(functools.partial(method, **kwargs), what=operation)

        events = await tail_async(self.tail.fetch(_expected_hosts(description)), call)
        for event in events:
            ts = event.timestamp
            stamp = datetime.fromtimestamp(ts / 1000, tz=UTC).isoformat(timespec="milliseconds") if ts else ""
            message = event.message.rstrip("\n")
            line = f"[{event.host}] {stamp} {message}"
            self.emit("%s", line)
            self.last_lines.append(line[:LAST_LINE_CHARS])
        return len(events)


class TrainingJobTrigger(SageMakerJobTrigger):
    """Wait for a SageMaker training job; stream its logs and status timeline while waiting.

    :param job_name: the training job to watch.
    :param poll_interval: seconds; a status change is noticed within one interval.
    :param max_wait_seconds: give up with a ``"timeout"`` event after this long; ``None`` waits
        for as long as the job runs (the default; there is no hidden cap).
    :param stream_logs: copy the job's CloudWatch logs into the task log while deferred.
    :param deadline: give up at this POSIX time instead (wall clock, so a restarted triggerer keeps
        it), e.g. when the task's ``execution_timeout`` ends; ``deadline_reason`` names the limit.
    """

    _fields = ("job_name",)
    _common_fields = (
        "aws_conn_id",
        "region_name",
        "poll_interval",
        "max_wait_seconds",
        "stream_logs",
        "deadline",
        "deadline_reason",
    )

    def __init__(
        self,
        job_name: str,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        poll_interval: float = 30,
        max_wait_seconds: float | None = None,
        stream_logs: bool = True,
        deadline: float | None = None,
        deadline_reason: str | None = None,
    ) -> None:
        super().__init__(
            poll_interval=poll_interval, deadline=deadline, aws_conn_id=aws_conn_id, region_name=region_name
        )
        self.job_name = job_name
        self.max_wait_seconds = max_wait_seconds
        self.stream_logs = stream_logs
        self.deadline_reason = deadline_reason

    def _terminal_event(self, desc: dict[str, Any]) -> TriggerEvent:
        status = desc.get("TrainingJobStatus")
        secondary = desc.get("SecondaryStatus")
        reason = desc.get("FailureReason")
        if status in SUCCESS_STATES:
            return self._event("success", f"Training job {self.job_name} completed.", status)
        if status not in STOPPED_STATES or secondary in FAILED_SECONDARY:
            why = reason or secondary or "no FailureReason given"
            return self._event(
                "failed", f"Training job {self.job_name} {status}: {why}", status, reason or secondary
            )
        why = f": {reason}" if reason else "."
        return self._event("stopped", f"Training job {self.job_name} was stopped{why}", status, reason)

    def _log_transitions(self, desc: dict[str, Any], already: int) -> int:
        transitions = desc.get("SecondaryStatusTransitions") or []
        for t in transitions[already:]:
            self.log.info(
                "Training job %s: %s (started %s)%s",
                self.job_name,
                t.get("Status"),
                _fmt_time(t.get("StartTime")),
                f" - {t['StatusMessage']}" if t.get("StatusMessage") else "",
            )
        return max(already, len(transitions))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = self.deadline
        limit = self.deadline_reason or "the deadline"
        if deadline is None and self.max_wait_seconds is not None:
            deadline, limit = time.time() + self.max_wait_seconds, f"max_wait_seconds={self.max_wait_seconds}"
        poller = get_poller(self.aws_conn_id, self.region_name)
        watch: JobWatch = poller.subscribe(self.job_name, float(self.poll_interval), details=self.stream_logs)
        streamer = _LogStreamer(self.job_name, poller, self.log.info) if self.stream_logs else None
        seen_transitions = 0
        self.log.info(
            "Waiting for SageMaker training job %s (poll interval %ss, %s).",
            self.job_name,
            self.poll_interval,
            f"until {limit}" if deadline is not None else "no maximum wait",
        )
        try:
            while True:
                if watch.error is not None:
                    yield self._watch_error("training job", watch.error)
                    return
                desc = watch.description
                if desc is not None:
                    seen_transitions = self._log_transitions(desc, seen_transitions)
                    status = desc.get("TrainingJobStatus")
                    secondary = desc.get("SecondaryStatus")
                    shown = f"{status} ({secondary})" if secondary else status
                    self.log_change("status", shown, "Training job %s is %s.", self.job_name, shown)
                    terminal = status in TERMINAL_STATES
                    if streamer is not None and (terminal or secondary in STREAMING_SECONDARY):
                        await self.stream_best_effort(streamer, desc, self.job_name)
                    if terminal:
                        event = self._terminal_event(desc)
                        if streamer is not None:
                            event.payload["last_lines"] = list(streamer.last_lines)
                        yield event
                        return
                timeout = float(self.poll_interval)
                if deadline is not None and desc is not None:  # a job that just ended is not timed out
                    remaining = deadline - time.time()
                    if remaining <= 0:
                        yield self._event(
                            "timeout",
                            f"Training job {self.job_name} still "
                            f"{desc.get('TrainingJobStatus')} after {limit}; the job was not stopped.",
                            desc.get("TrainingJobStatus"),
                        )
                        return
                    timeout = min(timeout, remaining)
                await watch.wait(timeout)
        finally:
            poller.unsubscribe(watch)

    async def stop_resource(self) -> None:
        """Stop the training job, through the hook's stop: it tags the job ``stop-requested``
        first, so the job is reported as stopped on request, not as stopped outside Airflow."""
        from airflow_dist_training.hooks.training import SageMakerTrainingHook

        def stop() -> bool:  # the sync hook in a thread: the event loop keeps serving other triggers
            hook = SageMakerTrainingHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
            return hook.stop_training_job(self.job_name, reason="task killed while deferred")

        if not await asyncio.to_thread(stop):
            self.log.info("Training job %s was not running: nothing to stop.", self.job_name)
            return
        self.log.info("Requested StopTrainingJob for %s (task killed while deferred).", self.job_name)
