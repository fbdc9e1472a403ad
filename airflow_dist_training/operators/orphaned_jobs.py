"""``StopOrphanedTrainingJobsOperator``: a teardown that stops the training jobs a run left running.

The training task's ``on_kill`` stops its job when the task will not come back for it; this covers
what no ``on_kill`` runs for (``docs/training-operator.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_dist_training.compat import BaseOperator
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.hooks.backends import operator_backend
from airflow_dist_training.sagemaker.naming import identity_from_context, run_identity_hash
from airflow_dist_training.spec.backends import backend_record

if TYPE_CHECKING:
    from airflow.sdk import Context


class StopOrphanedTrainingJobsOperator(AwsConnectionMixin, BaseOperator):
    """Teardown: stop the jobs that a training task of this DAG run left running.

    ``on_kill`` cannot cover every case. Airflow runs none when the worker running the task dies
    (OOM kill, node loss), or when a deferred task is marked or cleared before the triggerer has
    started its trigger. Put this operator after the training task as a teardown; it does not
    change the DAG run's state::

        train >> StopOrphanedTrainingJobsOperator(
            task_id="stop_orphaned_jobs", training_task_id="train"
        ).as_teardown()

    It asks the training task's backend to stop the run's active jobs (on SageMaker,
    ``ListTrainingJobs`` by the run hash in their names). Returns the names it stopped.
    ``stage_train_evaluate`` adds the same teardown.

    :param training_task_id: the ``DistributedTrainingOperator`` task of this DAG (templated).
    :param backend: the training task's backend, a registered name (``spec/backends.py``).
    :param map_index: the training task's map index, for a mapped training task.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region (default: the connection's).
    """

    template_fields: Sequence[str] = ("training_task_id", "aws_conn_id", "region_name")
    ui_color = "#f3e5d8"

    def __init__(
        self,
        *,
        training_task_id: str,
        backend: str = "sagemaker",
        map_index: int = -1,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.training_task_id = training_task_id
        self.backend = backend_record(backend).name  # a registered name (SpecValidationError naming them)
        self.map_index = map_index
        self._set_aws_connection(aws_conn_id, region_name)

    job_backend = cached_property(operator_backend)

    def execute(self, context: Context) -> list[str]:
        dag_id = self.dag_id if self.has_dag() else "no-dag"
        run_hash = run_identity_hash(
            identity_from_context(context, self.training_task_id, dag_id=dag_id, map_index=self.map_index)
        )
        return self.stop_run(self.job_backend, run_hash, self.training_task_id, self.log)

    @staticmethod
    def stop_run(jobs: Any, run_hash: str, training_task_id: str, log: Any) -> list[str]:
        """Stop the run's InProgress jobs (their names carry ``run_hash``); returns their names.

        Shared with ``stage_train_evaluate``'s ``stop_orphaned_job`` teardown, which knows the run
        hash from the planned job name.
        """
        stopped = jobs.stop_run_jobs(run_hash, reason="the training task ended while its job was running")
        if stopped:
            log.warning("Stopped training jobs left running by %s: %s", training_task_id, stopped)
        else:
            log.info("No training job of %s is left running.", training_task_id)
        return stopped
