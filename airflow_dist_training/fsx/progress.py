"""Data repository task progress and failure texts (pure)."""

from __future__ import annotations

from typing import Any

NON_TERMINAL = ("PENDING", "EXECUTING", "CANCELING")
# file-system lifecycles that will never become AVAILABLE
FILE_SYSTEM_FAILED = ("FAILED", "MISCONFIGURED", "DELETING")


def task_progress(task: dict[str, Any]) -> dict[str, Any]:
    """A small JSON dict of a task's state and counts (XCom- and event-safe)."""
    status = task.get("Status") or {}
    return {
        "task_id": task.get("TaskId"),
        "type": task.get("Type"),
        "lifecycle": task.get("Lifecycle"),
        "total": int(status.get("TotalCount") or 0),
        "succeeded": int(status.get("SucceededCount") or 0),
        "failed": int(status.get("FailedCount") or 0),
        "released_bytes": int(status["ReleasedCapacity"])
        if status.get("ReleasedCapacity") is not None
        else None,
        "report_uri": report_uri(task),
        "failure": (task.get("FailureDetails") or {}).get("Message"),
    }


def format_progress(progress: dict[str, Any]) -> str:
    """``fsx task task-x (IMPORT_METADATA_FROM_REPOSITORY) EXECUTING: 7/10 succeeded, 1 failed``."""
    text = (
        f"FSx task {progress['task_id']} ({progress['type']}) {progress['lifecycle']}: "
        f"{progress['succeeded']}/{progress['total']} succeeded, {progress['failed']} failed"
    )
    if progress.get("released_bytes") is not None:
        from airflow_dist_training.fsx.preflight import human_bytes  # the pre-flight rules load on use

        text += f", released {human_bytes(progress['released_bytes'])}"
    return text


def report_uri(task: dict[str, Any]) -> str | None:
    """Where FSx writes the task's completion report: ``<Report.Path>/<TaskId>/`` (if enabled)."""
    report = task.get("Report") or {}
    if not report.get("Enabled") or not report.get("Path"):
        return None
    return f"{str(report['Path']).rstrip('/')}/{task.get('TaskId')}/"


def failure_message(progress: dict[str, Any]) -> str:
    """The task log / exception text for a task that did not succeed."""
    text = f"FSx data repository task {progress['task_id']} ended {progress['lifecycle']}"
    if progress.get("failure"):
        text += f": {progress['failure']}"
    text += f" ({progress['succeeded']}/{progress['total']} succeeded, {progress['failed']} failed)"
    if progress.get("report_uri"):
        text += f". Completion report (failed files): {progress['report_uri']}"
    else:
        text += ". No completion report was requested"
    return text


class DataRepositoryTaskFailed(RuntimeError):
    """A data repository task ended FAILED or CANCELED; the text points to its completion report."""

    def __init__(self, progress: dict[str, Any]):
        self.progress = progress
        self.task_id = progress.get("task_id")
        self.lifecycle = progress.get("lifecycle")
        self.report_uri = progress.get("report_uri")
        super().__init__(failure_message(progress))


def progress_from_event(event: dict[str, Any] | None) -> dict[str, Any]:
    """The progress of a successful FSx trigger event; raises with the failure otherwise."""
    if not event:
        raise RuntimeError("FSx trigger resumed the task without an event")
    if event.get("status") == "success":
        return dict(event["progress"])
    if event.get("status") in ("failed", "canceled") and event.get("progress"):
        raise DataRepositoryTaskFailed(event["progress"])
    raise RuntimeError(event.get("message") or f"FSx task wait ended with {event.get('status')}")
