"""``TrainingJobSensor``: wait for a training job started elsewhere (SageMaker, or a registered backend).

Same terminal-state rules as ``DistributedTrainingOperator`` (``docs/training-operator.md``): only
Completed is success, its ``TrainingResult`` dict the XCom; a Stopped job is never success.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_dist_training.compat import AirflowException, BaseSensorOperator, PokeReturnValue, conf
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.hooks.backends import operator_backend
from airflow_dist_training.job_states import JobStatus
from airflow_dist_training.links import sagemaker as links
from airflow_dist_training.spec.backends import backend_record

if TYPE_CHECKING:
    from airflow.sdk import Context


class TrainingJobSensor(AwsConnectionMixin, BaseSensorOperator):
    """Wait until a SageMaker training job ends; succeed only if it Completed.

    :param job_name: the training job (templated).
    :param backend: the backend the job runs on, a registered name (``spec/backends.py``).
    :param aws_conn_id: Airflow AWS connection (``None``: boto3's default chain).
    :param region_name: AWS region (default: the connection's).
    :param deferrable: wait in the triggerer; default ``[operators] default_deferrable``.
    :param max_wait_seconds: deferrable mode: the only limit on the wait (``None``: no limit).
        In poke/reschedule mode use the sensor's ``timeout``.
    :param stream_logs: deferrable mode: copy the job's CloudWatch logs into the task log.
    """

    template_fields: Sequence[str] = ("job_name", "aws_conn_id", "region_name")
    operator_extra_links = links.ALL_LINKS

    def __init__(
        self,
        *,
        job_name: str,
        backend: str = "sagemaker",
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        max_wait_seconds: float | None = None,
        stream_logs: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", 30)
        super().__init__(**kwargs)
        self.job_name = job_name
        self.backend = backend_record(backend).name  # a registered name (SpecValidationError naming them)
        self._set_aws_connection(aws_conn_id, region_name)
        self.deferrable = deferrable
        self.max_wait_seconds = max_wait_seconds
        self.stream_logs = stream_logs

    job_backend = cached_property(operator_backend)  # its status, result, links and trigger

    def execute(self, context: Context) -> Any:
        status = self._status()
        links.persist(context, **self.job_backend.links(status))
        if self.deferrable and status.active:
            interval = self.poke_interval
            trigger = self.job_backend.trigger(
                self.job_name,
                poll_interval=interval.total_seconds() if isinstance(interval, timedelta) else interval,
                max_wait_seconds=self.max_wait_seconds,
                stream_logs=self.stream_logs,
            )
            self.defer(trigger=trigger, method_name="execute_complete")
        return super().execute(context)

    def poke(self, context: Context) -> PokeReturnValue | bool:
        status = self._status()
        self.log.info("Training job %s is %s (%s)", self.job_name, status.state, status.phase)
        if status.active:
            return False
        return PokeReturnValue(is_done=True, xcom_value=dict(self.job_backend.result_of(status)))

    def _status(self, name: str | None = None) -> JobStatus:
        status = self.job_backend.status(name or self.job_name)
        if status is None:
            raise AirflowException(f"Training job {name or self.job_name} does not exist")
        return status

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        if not event or "job_name" not in event:  # resumed with none: watch the job again
            self.log.warning(
                "Resumed without a trigger event (%r): describing %s again.", event, self.job_name
            )
            return self.execute(context)
        self._job_name = str(event["job_name"])  # its links were persisted before deferring
        if event.get("status") in {"timeout", "error"}:
            raise AirflowException(str(event.get("message")))
        return dict(self.job_backend.result_of(self._status(self._job_name)))
