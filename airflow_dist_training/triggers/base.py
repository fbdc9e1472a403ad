"""``AwsWaitTrigger``: the one base for "poll an AWS resource until a terminal state".

What the training, processing and FSx waits share, and must keep alike, lives here: serialisation,
the wait limits (``deadline`` in POSIX wall time, so a restarted triggerer keeps it), logging on
change, best-effort log streaming and a shielded ``on_kill`` that stops the resource only when the
task will not come back for it (``docs/polling.md``, "Adding an AWS wait" and "When a deferred task's
job is stopped").
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import Any

from airflow_dist_training.aws_errors import error_code, is_transient
from airflow_dist_training.compat import BaseTrigger, TriggerEvent
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.task_kills import CancelCase, cancel_case, state_from, state_request

# Strong references to stops in flight: the event loop keeps only weak ones, and a cancelled
# trigger object may be dropped before its stop finishes.
_STOPS_IN_FLIGHT: set[asyncio.Future[None]] = set()


#: How long a cancelled wait keeps trying to read its task instance's state, and each read's bound.
_STATE_READ_SECONDS = 300.0
_STATE_READ_ATTEMPT_SECONDS = 20.0
_STATE_READ_PAUSE_SECONDS = 5.0


def wait_deadline(
    max_wait_seconds: float | None, execution_timeout: timedelta | None, started: datetime | None
) -> tuple[float | None, str | None]:
    """When a task's deferred wait must end, and the limit's name: ``max_wait_seconds`` from now, or
    the task's ``execution_timeout`` from the try's start (``started``; None: now), the earlier.

    Airflow 3.3 does not apply ``execution_timeout`` while a task is deferred (and a trigger
    timeout would fail the task without ``on_kill``). The trigger applies it, so a task that
    times out stops its job (``stop_on_timeout``) like in sync mode.
    """
    now = time.time()
    limits: list[tuple[float, str]] = []
    if max_wait_seconds is not None:
        limits.append((now + max_wait_seconds, f"max_wait_seconds={max_wait_seconds:g}"))
    if execution_timeout is not None:
        began = started.timestamp() if started is not None else now
        seconds = execution_timeout.total_seconds()
        limits.append((began + seconds, f"execution_timeout={seconds:g}s"))
    return min(limits) if limits else (None, None)


class AwsWaitTrigger(AwsConnectionMixin, BaseTrigger):
    """Wait for an AWS resource to reach a terminal state (see the module docstring).

    :param poll_interval: seconds between describe calls.
    :param deadline: POSIX time after which the wait ends with a ``"timeout"`` event; ``None``: none.
    :param aws_conn_id: Airflow AWS connection (``None``: boto3's default credential chain).
    :param region_name: AWS region (default: the connection's).
    """

    #: The resource's own constructor arguments, serialised first.
    _fields: tuple[str, ...] = ()
    #: The shared arguments this trigger serialises (subclasses add or drop some).
    _common_fields: tuple[str, ...] = ("aws_conn_id", "region_name", "poll_interval", "deadline")

    def __init__(
        self,
        *,
        poll_interval: float = 30,
        deadline: float | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
    ) -> None:
        super().__init__()
        self.poll_interval = poll_interval
        self.deadline = deadline
        self._set_aws_connection(aws_conn_id, region_name)
        self._last_logged: dict[str, Any] = {}

    def serialize(self) -> tuple[str, dict[str, Any]]:
        names = (*self._fields, *self._common_fields)
        return (f"{type(self).__module__}.{type(self).__qualname__}", {n: getattr(self, n) for n in names})

    def next_wait(self, *, attempts: int = 0, max_attempts: int | None = None) -> float | None:
        """Seconds to sleep before the next poll, or ``None`` when a wait limit is reached."""
        if max_attempts is not None and attempts >= max_attempts:
            return None
        wait = float(self.poll_interval)
        if self.deadline is not None:
            remaining = self.deadline - time.time()
            if remaining <= 0:
                return None
            wait = min(wait, remaining)
        return wait

    def log_change(self, key: str, value: Any, message: str, *args: Any) -> None:
        """Log ``message`` when ``value`` differs from the last one logged under ``key``."""
        if self._last_logged.get(key, object()) != value:
            self._last_logged[key] = value
            self.log.info(message, *args)

    async def stream_best_effort(self, streamer: Any, description: dict[str, Any], what: str) -> None:
        """Copy new CloudWatch lines to the task log; a failure is logged, never raised."""
        try:
            await streamer.fetch(description)
        except Exception as exc:  # logs are best effort: never fail the wait because of them
            level = self.log.info if is_transient(exc) else self.log.warning
            level("Could not read CloudWatch logs of %s: %s", what, exc)

    async def on_kill(self) -> None:
        """The triggerer cancelled this wait: stop the resource only if the task will not come back
        for it (``cancel_case``), so that it stops billing.

        The decision and the stop are shielded and outlive Airflow's ``on_kill`` bound: under load
        the triggerer can take minutes to answer a state read (seen on the test stack), and a user's
        kill must still stop the job once the state is read.
        """
        if type(self).stop_resource is AwsWaitTrigger.stop_resource:
            return  # nothing of this wait bills by the second (FSx tasks): nothing to decide
        decision = asyncio.ensure_future(self._decide_and_stop())
        _STOPS_IN_FLIGHT.add(decision)
        decision.add_done_callback(_STOPS_IN_FLIGHT.discard)
        await asyncio.shield(decision)

    async def _decide_and_stop(self) -> None:
        case = await self._cancel_case()
        what = getattr(self, "job_name", type(self).__name__)
        if not case.stop:
            self.log.warning("Wait for %s cancelled: %s; %s is left running.", what, case.why, what)
            return
        self.log.info("Wait for %s cancelled: %s; stopping %s.", what, case.why, what)
        await self.stop_resource()

    async def _cancel_case(self) -> CancelCase:
        """Read this wait's task instance state from the triggerer (the Task SDK's ``GetTaskStates``).

        ``asend`` on the triggerer's own loop: the sync ``send`` from a thread deadlocks the trigger
        runner while another ``asend`` is in flight. Without a task instance (``on_kill`` called
        outside a triggerer) the call is a kill. Reads are retried for ``_STATE_READ_SECONDS``; if
        none answers, the job is left running: a stop that cannot be justified is not made.
        """
        ti = getattr(self, "task_instance", None)
        if ti is None:
            return CancelCase(True, "on_kill was called outside a triggerer")
        request, key = state_request(ti)
        deadline = time.monotonic() + _STATE_READ_SECONDS
        while True:
            try:
                from airflow.sdk.execution_time import task_runner

                attempt = min(_STATE_READ_ATTEMPT_SECONDS, max(deadline - time.monotonic(), 0.01))
                reply: Any = await asyncio.wait_for(task_runner.SUPERVISOR_COMMS.asend(request), attempt)
                state = state_from(reply, ti, key)
            except Exception as exc:  # no comms, the triggerer slow to answer, or the row gone
                if time.monotonic() >= deadline:
                    return CancelCase(False, f"its task instance's state could not be read ({exc!r})")
                self.log.info("Reading %s's state to decide on its job: %r; trying again.", key, exc)
                await asyncio.sleep(min(_STATE_READ_PAUSE_SECONDS, max(deadline - time.monotonic(), 0.0)))
                continue
            return cancel_case(state)

    async def stop_resource(self) -> None:
        """Stop the waited-on resource. Default: leave it running (nothing bills by the second)."""


class SageMakerJobTrigger(AwsWaitTrigger):
    """A wait on one SageMaker job (training, processing): its events carry the same fields.

    Event payload::

        {"status": "success" | "failed" | "stopped" | "timeout" | "error", "job_name": str,
         "job_status": str | None, "failure_reason": str | None, "message": str}
    """

    job_name: str

    def _event(
        self, status: str, message: str, job_status: str | None = None, failure_reason: str | None = None
    ) -> TriggerEvent:
        return TriggerEvent(
            {
                "status": status,
                "job_name": self.job_name,
                "job_status": job_status,
                "failure_reason": failure_reason,
                "message": message,
            }
        )

    def _watch_error(self, what: str, exc: BaseException) -> TriggerEvent:
        """The ``"error"`` event of a wait that cannot go on (a permanent AWS error)."""
        code = f"{error_code(exc)}: " if error_code(exc) else ""
        return self._event("error", f"Cannot watch {what} {self.job_name}: {code}{exc}")
