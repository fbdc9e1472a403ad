"""Watch a running job's checkpoints: fail or alert when no new complete checkpoint appears in time."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_dist_training.checkpoints.freshness import Freshness, assess_freshness
from airflow_dist_training.compat import AirflowFailException
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.operators.checkpoints import check_layout, checkpoint_store

if TYPE_CHECKING:
    from airflow.sdk import Context

ON_STALE = ("fail", "warn")


class CheckpointFreshnessSensor(AwsConnectionMixin, BaseSensorOperator):
    """Run next to a training task; fail (or alert) if checkpoints stop arriving.

    Each poke finds the newest complete checkpoint under ``checkpoint_uri`` (a few S3 requests, see
    :class:`CheckpointHook`) and compares its upload time with ``max_age``. Before the first checkpoint,
    the age counts from the DAG run's start. This catches stalled uploads (aws/sagemaker-python-sdk#3062).

    The sensor succeeds (pushing the newest checkpoint's XCom dict) when ``until_step`` is reached or
    the SageMaker job ``training_job_name`` is no longer ``InProgress``; set ``timeout`` as usual.

    :param checkpoint_uri: the running job's checkpoint root. Templated.
    :param max_age: longest acceptable time without a new complete checkpoint (timedelta or seconds).
    :param on_stale: ``"fail"`` (default; with ``soft_fail=True`` the task is skipped instead) or
        ``"warn"``: log a warning, call ``stale_callback`` and keep watching.
    :param stale_callback: ``callback(context, details_dict)`` called when stale (both modes).
    :param until_step: succeed once a complete checkpoint with at least this step exists.
    :param training_job_name: succeed once this SageMaker job is no longer InProgress. Templated.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region (default: the connection's).
    :param checkpoint_layout: the checkpoint layout (``auto`` detects it; ``docs/checkpoints.md``).
    :param step_pattern: the ``single-file`` layout's file name pattern.

    Supports ``mode="reschedule"`` (no worker slot held between pokes).
    """

    template_fields: Sequence[str] = ("checkpoint_uri", "training_job_name", "aws_conn_id", "region_name")

    def __init__(
        self,
        *,
        checkpoint_uri: str,
        max_age: timedelta | float,
        on_stale: str = "fail",
        stale_callback: Callable[[Any, dict[str, Any]], None] | None = None,
        until_step: int | None = None,
        training_job_name: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        checkpoint_layout: str = "auto",
        step_pattern: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_layout(checkpoint_layout, step_pattern)
        self.checkpoint_layout = checkpoint_layout
        self.step_pattern = step_pattern
        self.checkpoint_uri = checkpoint_uri
        self.max_age_seconds = max_age.total_seconds() if isinstance(max_age, timedelta) else float(max_age)
        problems = []
        if self.max_age_seconds <= 0:
            problems.append(("max_age", f"must be positive, got {max_age!r}"))
        if on_stale not in ON_STALE:
            problems.append(("on_stale", f"must be one of {', '.join(ON_STALE)}; got {on_stale!r}"))
        if problems:
            raise SpecValidationError(problems)
        self.on_stale = on_stale
        self.stale_callback = stale_callback
        self.until_step = until_step
        self.training_job_name = training_job_name
        self._set_aws_connection(aws_conn_id, region_name)

    hook = cached_property(checkpoint_store)

    def _job_finished(self) -> bool:
        if not self.training_job_name:
            return False
        from airflow_dist_training.hooks.aws import aws_hook
        from airflow_dist_training.job_states import is_terminal

        client = aws_hook("sagemaker", aws_conn_id=self.aws_conn_id, region_name=self.region_name).get_conn()
        status = client.describe_training_job(TrainingJobName=self.training_job_name)["TrainingJobStatus"]
        return is_terminal(status)  # Stopping is still running: its last checkpoint may be uploading

    @staticmethod
    def _started_at(context: Context) -> float:
        dag_run = context.get("dag_run")
        for attr in ("start_date", "run_after", "logical_date"):
            value = getattr(dag_run, attr, None) if dag_run is not None else None
            if value is not None:
                return float(value.timestamp())
        ti = context.get("ti")
        start = getattr(ti, "start_date", None)
        return float(start.timestamp()) if start is not None else time.time()

    def check(self, context: Context, now: float | None = None) -> tuple[Freshness, dict[str, Any] | None]:
        info = self.hook.latest_complete(self.checkpoint_uri)
        freshness = assess_freshness(
            root=self.checkpoint_uri,
            now=time.time() if now is None else now,
            max_age_seconds=self.max_age_seconds,
            started_at=self._started_at(context),
            latest_modified=info.manifest_modified if info else None,
            latest_uri=info.uri if info else None,
            latest_step=info.step if info else None,
        )
        return freshness, info.to_xcom() if info else None

    def poke(self, context: Context) -> bool | PokeReturnValue:
        freshness, latest = self.check(context)
        if self.until_step is not None and freshness.step is not None and freshness.step >= self.until_step:
            self.log.info("Reached step %s (until_step=%s)", freshness.step, self.until_step)
            return PokeReturnValue(is_done=True, xcom_value=latest)
        if self._job_finished():
            self.log.info("Training job %s is no longer running; stop watching", self.training_job_name)
            return PokeReturnValue(is_done=True, xcom_value=latest)
        if not freshness.stale:
            self.log.info("Checkpoints fresh: %s", freshness.message)
            return False
        if self.stale_callback is not None:
            self.stale_callback(context, freshness.to_xcom())
        if self.on_stale == "warn":
            self.log.warning("Checkpoints stale: %s", freshness.message)
            return False
        raise AirflowFailException(f"Checkpoints stale: {freshness.message}")
