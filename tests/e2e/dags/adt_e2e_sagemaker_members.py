"""A sweep of three members on the SageMaker backend: the Training view's members side by side.

The demo job (``examples/specs/local_demo.yaml``) as a ``sweep_train_evaluate`` grid of three
learning rates, against the e2e services' SageMaker test endpoint (``AWS_ENDPOINT_URL``, set by
tests/e2e/conftest.py), one process per member, training only (no evaluation, no gate: the sweep
picks its winner by the training jobs' final ``train:loss``). ``epoch-sleep`` makes each job's
metric lines span more than 60 s, so each member's curves have >= 2 one-minute CloudWatch points
and its progress (``train:epoch`` of the spec's ``epochs``) has a rate, hence an ETA, while it runs.
It trains beside ``adt_e2e_sagemaker_view`` (same bucket, same training data).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG

from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.sweep_groups import sweep_train_evaluate

REPO = Path(__file__).resolve().parents[3]
BUCKET = "adt-e2e-sagemaker-view"  # tests/e2e/test_training_view_e2e.py uploads the training data
EPOCHS = 12
EPOCH_SLEEP = 6.0  # (EPOCHS - 1) * EPOCH_SLEEP > 60 s: >= 2 one-minute points per member
LEARNING_RATES = [0.01, 0.05, 0.2]
SWEEP = {
    "strategy": "grid",
    "ranges": {"lr": LEARNING_RATES},
    "objective": {"metric": "train:loss", "type": "Minimize"},
}


def _spec() -> Any:
    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml").model_dump(
        mode="json", exclude_unset=True
    )
    spec["name"] = "e2e-members"
    spec["source"]["source_dir"] = str(REPO / "examples")
    spec["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    spec["distribution"]["processes_per_host"] = 1  # three members on a small machine
    spec["channels"]["train"] = {"type": "s3", "uri": f"s3://{BUCKET}/data/train"}
    spec["checkpoint"] = {"s3_uri": f"s3://{BUCKET}/checkpoints/e2e-members"}
    spec["output"] = {"s3_path": f"s3://{BUCKET}/models"}
    spec["hyperparameters"].update({"epochs": EPOCHS, "epoch-sleep": EPOCH_SLEEP})
    return load_spec(spec)


with DAG(
    dag_id="adt_e2e_sagemaker_members",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow-dist-training", "e2e"],
    # a task that cannot reach a loaded api-server at start-up fails before running: try again
    default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=10)},
) as dag:
    sweep_train_evaluate(
        group_id="sweep",
        spec=_spec(),
        sweep=SWEEP,
        backend="sagemaker",
        base_dir=REPO,
        region_name="us-east-1",
        # the triggerer notices the end within seconds (the operator's default polls every 30 s)
        training_kwargs={"poll_interval": 3},
    )
