"""Two training tasks for the kill test: one waits on a worker, one in the triggerer.

SageMaker is the moto server of the test session, reached through the connection
``adt_e2e_fault_moto`` (its ``endpoint_url`` extra; tests/e2e/conftest.py), whose lifecycle fake
keeps jobs InProgress, so both tasks wait until the test marks them failed or success. (The
services' ``AWS_ENDPOINT_URL`` is the SageMaker test endpoint, which runs real jobs.)
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_dist_training.operators.training import DistributedTrainingOperator


def spec(name: str) -> dict[str, object]:
    return {
        "name": name,
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": "s3://adt-e2e/code/sourcedir.tar.gz"},
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
        "distribution": {"strategy": "torch_distributed"},
        "output": {"s3_path": "s3://adt-e2e/output"},
    }


with DAG("adt_e2e_kill", schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False):
    for mode in ("sync", "deferred"):
        DistributedTrainingOperator(
            task_id=f"train_{mode}",
            spec=spec(f"kill-{mode}"),
            aws_conn_id="adt_e2e_fault_moto",
            region_name="us-east-1",
            deferrable=mode == "deferred",
            poll_interval=1,
            stream_logs=False,
            # with retries left, only the task instance's state says the user killed it (issue 39)
            retries=1,
        )
