"""Deferrable waits on FSx for Lustre: data repository tasks (with progress) and file-system creation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow_dist_training.compat import TriggerEvent
from airflow_dist_training.fsx.progress import (
    FILE_SYSTEM_FAILED,
    NON_TERMINAL,
    failure_message,
    format_progress,
    task_progress,
)
from airflow_dist_training.triggers.base import AwsWaitTrigger


class _FSxTrigger(AwsWaitTrigger):
    """Connection arguments, serialization and the hook shared by the FSx triggers.

    An FSx task or file system is never stopped on kill (the default ``stop_resource``): a
    half-done import is harmless and a file system being created is the user's.

    :param max_attempts: give up (``status: timeout``) after this many polls; ``None`` never.
    :param verify: SSL verification setting.
    :param botocore_config: extra botocore client configuration.
    """

    _common_fields = (
        "poll_interval",
        "max_attempts",
        "deadline",
        "aws_conn_id",
        "region_name",
        "verify",
        "botocore_config",
    )

    def __init__(
        self,
        *,
        poll_interval: float = 30,
        max_attempts: int | None = None,
        deadline: float | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            poll_interval=poll_interval, deadline=deadline, aws_conn_id=aws_conn_id, region_name=region_name
        )
        self.max_attempts = max_attempts
        self.verify = verify
        self.botocore_config = botocore_config

    def _hook(self) -> Any:
        from airflow_dist_training.hooks.fsx import FSxHook

        return FSxHook(**self.aws_settings)


class FSxDataRepositoryTaskTrigger(_FSxTrigger):
    """Poll ``DescribeDataRepositoryTasks`` until the task is SUCCEEDED, FAILED or CANCELED.

    Logs ``total/succeeded/failed`` (and released capacity for release tasks) whenever they change.
    Yields one event: ``{"status": "success" | "failed" | "canceled" | "timeout" | "error",
    "fsx_task_id", "progress", "message"}``; ``progress["report_uri"]`` is the completion report.

    :param fsx_task_id: The data repository task id (``task-...``).
    """

    _fields = ("fsx_task_id",)

    def __init__(self, fsx_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fsx_task_id = fsx_task_id

    def _event(self, status: str, progress: dict[str, Any] | None, message: str) -> TriggerEvent:
        return TriggerEvent(
            {"status": status, "fsx_task_id": self.fsx_task_id, "progress": progress, "message": message}
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_dist_training.hooks.fsx import _clean

        attempts = 0
        try:
            async with await self._hook().get_async_conn() as client:
                while True:
                    response = await client.describe_data_repository_tasks(TaskIds=[self.fsx_task_id])
                    task = _clean(response["DataRepositoryTasks"][0])
                    progress = task_progress(task)
                    line = format_progress(progress)
                    self.log_change("progress", line, "%s", line)
                    lifecycle = progress["lifecycle"]
                    if lifecycle not in NON_TERMINAL:
                        ok = lifecycle == "SUCCEEDED"
                        status = "success" if ok else str(lifecycle).lower()
                        yield self._event(status, progress, line if ok else failure_message(progress))
                        return
                    attempts += 1
                    wait = self.next_wait(attempts=attempts, max_attempts=self.max_attempts)
                    if wait is None:
                        message = f"FSx task {self.fsx_task_id} still {lifecycle} after {attempts} polls"
                        yield self._event("timeout", progress, message)
                        return
                    await asyncio.sleep(wait)
        except Exception as exc:
            yield self._event("error", None, f"{type(exc).__name__}: {exc}")


class FSxFileSystemAvailableTrigger(_FSxTrigger):
    """Poll ``DescribeFileSystems`` until a new file system is AVAILABLE (or FAILED/MISCONFIGURED).

    Creating a Lustre file system takes minutes; this frees the worker slot meanwhile. Yields one
    event: ``{"status": "success" | "failed" | "timeout" | "error", "file_system_id", "lifecycle",
    "message"}``.

    :param file_system_id: The file system (``fs-...``).
    """

    _fields = ("file_system_id",)

    def __init__(self, file_system_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.file_system_id = file_system_id

    def _event(self, status: str, lifecycle: str | None, message: str) -> TriggerEvent:
        return TriggerEvent(
            {"status": status, "file_system_id": self.file_system_id, "lifecycle": lifecycle, "message": message}
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        attempts = 0
        fs_id = self.file_system_id
        try:
            async with await self._hook().get_async_conn() as client:
                while True:
                    found = (await client.describe_file_systems(FileSystemIds=[fs_id]))["FileSystems"]
                    if not found:
                        yield self._event(
                            "failed", None, f"file system {fs_id} disappeared while being created"
                        )
                        return
                    lifecycle = found[0].get("Lifecycle")
                    self.log_change("lifecycle", lifecycle, "File system %s is %s", fs_id, lifecycle)
                    if lifecycle == "AVAILABLE":
                        yield self._event("success", lifecycle, f"file system {fs_id} is AVAILABLE")
                        return
                    if lifecycle in FILE_SYSTEM_FAILED:
                        reason = (found[0].get("FailureDetails") or {}).get("Message", "")
                        yield self._event(
                            "failed", lifecycle, f"file system {fs_id} is {lifecycle}: {reason}".rstrip(": ")
                        )
                        return
                    attempts += 1
                    wait = self.next_wait(attempts=attempts, max_attempts=self.max_attempts)
                    if wait is None:
                        yield self._event(
                            "timeout",
                            lifecycle,
                            f"file system {fs_id} not AVAILABLE after {attempts} polls ({lifecycle})",
                        )
                        return
                    await asyncio.sleep(wait)
        except Exception as exc:
            yield self._event("error", None, f"{type(exc).__name__}: {exc}")
