"""One short training job on the SageMaker test endpoint, for the production-like stack's scenarios.

``adt_prod_training`` waits in the triggerer (deferrable, logs streamed); ``adt_prod_training_sync``
waits on its Celery worker. Both send the job to ``AWS_ENDPOINT_URL`` (the emulator), with the
run's conf ``seconds`` as the job's length. One retry, at once: the worker-loss scenario's retry.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from airflow_dist_training.operators.training import DistributedTrainingOperator

BUCKET = os.environ.get("ADT_PROD_BUCKET", "adt-prod-stack")
JOB_SOURCE = Path(__file__).resolve().parent / "job"


def spec() -> dict[str, object]:
    return {
        "name": "prod-{{ dag.dag_id | replace('_', '-') }}",
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": str(JOB_SOURCE)},
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "hyperparameters": {"seconds": "{{ params.seconds }}"},
        "output": {"s3_path": f"s3://{BUCKET}/models"},
    }


# ``adt_prod_training_many``: the 40-task round runs at 2.5x the stack's measured capacity (16 deferred
# tasks before a missed heartbeat, docs/benchmarks.md), where the scheduler's 20 s heartbeat verdict can
# fail a task's first AND second try; each try reattaches to the same job, so retries cost no job.
for dag_id, deferrable, retries in (
    ("adt_prod_training", True, 1),
    ("adt_prod_training_sync", False, 1),
    ("adt_prod_training_many", True, 4),
):
    with DAG(
        dag_id,
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1),
        catchup=False,
        params={"seconds": Param(20, type="integer", minimum=1, maximum=600)},
        max_active_runs=64,
        default_args={"retries": retries, "retry_delay": timedelta(seconds=0)},
    ):
        DistributedTrainingOperator(
            task_id="train",
            spec=spec(),
            backend="sagemaker",
            aws_conn_id=None,
            region_name="us-east-1",
            deferrable=deferrable,
            poll_interval=2,
            stream_logs=True,
        )
