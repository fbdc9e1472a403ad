"""Why a task's wait or try is being killed, read from its task instance's state, and whether the job
it started must be stopped: only when the task will not come back for it (``docs/polling.md``, "When
a deferred task's job is stopped").

Two callers: a trigger's ``on_kill`` in the triggerer (``triggers/base.py``), and an operator's
``on_kill`` in the task runner (``worker_kill_case``, ``stop_on_worker_kill``). Both ask the Task SDK's ``GetTaskStates``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CancelCase:
    """Why a wait or a try was killed, and whether the waited-on job must be stopped."""

    stop: bool
    why: str


#: Airflow 3.3 calls a trigger's ``on_kill`` whenever its triggerer stops running it and the
#: triggerer is not shutting down (``TriggerRunner.cancel_triggers``): a user's mark failed or
#: success, but also a task instance the scheduler failed (a missed heartbeat) with retries left,
#: a cleared task, and a trigger moved to another triggerer. The task runner calls an operator's
#: ``on_kill`` when its supervisor is told the try must end (the same cases, before deferral).
#: Only the state tells them apart.
_CANCEL_CASES: dict[str | None, CancelCase] = {
    "failed": CancelCase(True, "the task instance is failed (marked failed, or its last try ended)"),
    "success": CancelCase(True, "the task instance was marked success"),
    "skipped": CancelCase(True, "the task instance was marked skipped"),
    "upstream_failed": CancelCase(True, "the task instance is upstream_failed"),
    "removed": CancelCase(True, "the task instance was removed"),
    "deferred": CancelCase(False, "the task is still deferred: its trigger moved to another triggerer"),
    "up_for_retry": CancelCase(
        False, "the task instance failed with retries left (e.g. a missed heartbeat): its next try reattaches"
    ),
    None: CancelCase(False, "the task instance was cleared: its next try reattaches"),
    "restarting": CancelCase(False, "the task instance was cleared: its next try reattaches"),
}
_COMING_BACK = CancelCase(False, "the task's next try is already under way and reattaches")
#: The supervisor sends SIGKILL 5 s after SIGTERM: the state read must leave time for the stop.
WORKER_READ_SECONDS = 2.5


def cancel_case(state: str | None) -> CancelCase:
    """The case of a killed wait or try whose task instance is now in ``state``."""
    return _CANCEL_CASES.get(state, _COMING_BACK)


def state_request(ti: Any) -> tuple[Any, str]:
    """The ``GetTaskStates`` request for ``ti`` and the key its state comes back under."""
    from airflow.sdk.execution_time.comms import GetTaskStates

    found = getattr(ti, "map_index", None)
    map_index = -1 if found is None else int(found)
    request = GetTaskStates(
        dag_id=ti.dag_id,
        task_ids=[ti.task_id],
        run_ids=[ti.run_id],
        map_index=map_index if map_index >= 0 else None,
    )
    return request, ti.task_id if map_index < 0 else f"{ti.task_id}_{map_index}"


def state_from(reply: Any, ti: Any, key: str) -> str | None:
    """The task instance's state in a ``TaskStatesResult`` (``KeyError`` if the row is gone)."""
    state = (reply.task_states.get(ti.run_id) or {})[key]
    return None if state is None else str(getattr(state, "value", state))


_UNREAD = object()


def worker_kill_case(ti: Any, *, read_seconds: float | None = None) -> CancelCase:
    """The case of an operator's ``on_kill`` in the task runner, for the try ``ti``.

    The runner calls ``on_kill`` on ``execution_timeout`` (the try ends by the user's bound: stop),
    and on SIGTERM from its supervisor: the server said the try must end (marked failed or success,
    cleared, or failed by the scheduler for a missed heartbeat), or the worker is shutting down. The
    state tells them apart. It is read in a thread bounded by ``read_seconds``: the signal may have
    interrupted the runner in the middle of its own request, whose lock it holds. If it cannot be
    read, or the try is still ``running`` (the worker is going away), the job is stopped only on the
    last try: otherwise the scheduler retries the task and the next try reattaches.
    """
    read_seconds = WORKER_READ_SECONDS if read_seconds is None else read_seconds
    from airflow_dist_training.compat import AirflowTaskTimeout

    if isinstance(sys.exc_info()[1], AirflowTaskTimeout):
        return CancelCase(True, "the try ran past its execution_timeout")
    comms = None
    try:
        from airflow.sdk.execution_time import task_runner

        comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    except ImportError:
        pass
    if ti is None or comms is None:
        return CancelCase(True, "on_kill was called outside a task runner")
    found: dict[str, Any] = {}

    def read() -> None:
        try:
            request, key = state_request(ti)
            found["state"] = state_from(comms.send(request), ti, key)
        except Exception as exc:  # the row gone, the server slow, the lock held: unread
            found["error"] = exc

    reader = threading.Thread(target=read, name="adt-kill-state", daemon=True)
    reader.start()
    reader.join(read_seconds)
    state = found.get("state", _UNREAD)
    if state is not _UNREAD and state != "running":
        return cancel_case(state)  # type: ignore[arg-type]
    if state is not _UNREAD:
        why = "it is still running (its worker is stopping it)"
    elif "error" in found:
        why = f"its state could not be read ({found['error']!r})"
    else:
        why = f"its state was not read within {read_seconds:.1f} s"
    if int(getattr(ti, "try_number", 1) or 1) > int(getattr(ti, "max_tries", 0) or 0):
        return CancelCase(True, f"the task was killed and {why}, on its last try")
    return CancelCase(False, f"the task was killed and {why}, with retries left: its next try reattaches")


def stop_on_worker_kill(ti: Any, name: str, stop: Callable[[], object], log: Any, *, what: str) -> None:
    """An operator's ``on_kill`` for the job ``name`` its try ``ti`` started: ``stop`` it unless the
    task comes back for it (``worker_kill_case``), saying which in the task log. Never raises."""
    case = worker_kill_case(ti)
    if not case.stop:
        log.warning("Task killed: %s; %s is left running.", case.why, name)
        return
    log.info("Task killed: %s; stopping %s.", case.why, name)
    try:
        stop()
    except Exception as exc:  # on_kill must not raise
        log.error("Could not stop %s %s: %s", what, name, exc)
