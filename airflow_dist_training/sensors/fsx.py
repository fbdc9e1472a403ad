"""Wait for an FSx data repository task started elsewhere (poke, reschedule or deferrable)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from airflow_dist_training.fsx.progress import (
    DataRepositoryTaskFailed,
    format_progress,
    progress_from_event,
    task_progress,
)
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.operators import default_deferrable
from airflow_dist_training.operators.fsx import fsx_hook

if TYPE_CHECKING:
    from airflow.sdk import Context


class FSxDataRepositoryTaskSensor(AwsConnectionMixin, BaseSensorOperator):
    """Succeed when the data repository task SUCCEEDED; fail (naming its report) on FAILED/CANCELED.

    :param fsx_task_id: The task id (``task-...``), e.g. from ``FSxDataRepositoryTaskOperator``'s XCom.
    :param deferrable: Wait in the triggerer (default ``[operators] default_deferrable``).
    :param aws_conn_id: The Airflow AWS connection.
    :param region_name: AWS region.
    :param verify: SSL verification setting.
    :param botocore_config: Extra botocore client configuration.
    """

    template_fields: Sequence[str] = ("fsx_task_id", "aws_conn_id", "region_name")

    def __init__(
        self,
        *,
        fsx_task_id: str,
        deferrable: bool | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.fsx_task_id = fsx_task_id
        self.deferrable = default_deferrable(deferrable)
        self._set_aws_connection(aws_conn_id, region_name, verify, botocore_config)

    hook = cached_property(fsx_hook)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.poke(context):
            return None
        from airflow_dist_training.triggers.fsx import FSxDataRepositoryTaskTrigger

        self.defer(
            trigger=FSxDataRepositoryTaskTrigger(
                fsx_task_id=self.fsx_task_id,
                poll_interval=self.poke_interval,
                **self.aws_settings,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> None:
        progress_from_event(event)

    def poke(self, context: Context) -> bool:
        progress = task_progress(self.hook.describe_task(self.fsx_task_id))
        self.log.info("%s", format_progress(progress))
        if progress["lifecycle"] == "SUCCEEDED":
            return True
        if progress["lifecycle"] in ("FAILED", "CANCELED"):
            raise DataRepositoryTaskFailed(progress)
        return False
