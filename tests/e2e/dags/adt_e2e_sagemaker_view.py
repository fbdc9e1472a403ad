"""The demo job on the SageMaker backend, paced to span two CloudWatch minutes: the Training view's
SageMaker e2e test.

The demo spec (``examples/specs/local_demo.yaml``) with ``backend="sagemaker"`` against the e2e
services' SageMaker test endpoint (``AWS_ENDPOINT_URL``, set by tests/e2e/conftest.py): the code
directory is packed and uploaded, ``checkpointing.py`` ships with it (``source.dependencies``: the
job's image has nothing of this provider), and the job reads its training data from the test's
bucket. The endpoint publishes the job's ``MetricDefinitions`` matches to CloudWatch, which the
Training view reads by the minute (``Period`` 60): ``epoch-sleep`` makes the job's metric lines
span more than 60 s, so each host's loss curve has >= 2 points. Training only: the view's
gate/registry path is what the local e2e run covers.

The same job is the checkpoint-stall scenario (``checkpoints.freshness``): the script writes no
checkpoint after epoch ``CHECKPOINT_UNTIL_EPOCH`` and trains on for about 90 s, so
``watch_checkpoints`` (deferred beside ``train``) fails with the reason after ``MAX_AGE`` s and its
``on_failure_callback`` fires, while the job runs on and completes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG

from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.pipeline import CheckpointFreshness, CheckpointStep
from airflow_dist_training.task_groups import stage_train_evaluate

REPO = Path(__file__).resolve().parents[3]
BUCKET = "adt-e2e-sagemaker-view"  # the test uploads the demo's training data under data/train
EPOCHS = 24
EPOCH_SLEEP = 4.1  # (EPOCHS - 1) * EPOCH_SLEEP > 60 s: the loss lines fall in >= 2 one-minute periods;
# short epochs, so that little of the job is the sleep after its last line
CHECKPOINT_UNTIL_EPOCH = 1  # checkpoints of epochs 0 and 1, then none for 22 epochs (> 90 s)
MAX_AGE = 45.0  # the alarm: > the job's start (torch import: 15 s on a loaded CI machine), its first
# checkpoint's 4 s and the 10 s checkpoint sync; < the 90 s stall
ALARM_CALLBACK_LINE = "checkpoint-stall alarm callback"


def _spec() -> Any:
    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml").model_dump(
        mode="json", exclude_unset=True
    )
    spec["name"] = "e2e-sagemaker-view"
    spec["source"]["source_dir"] = str(REPO / "examples")
    spec["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    spec["channels"]["train"] = {"type": "s3", "uri": f"s3://{BUCKET}/data/train"}
    spec["checkpoint"] = {"s3_uri": f"s3://{BUCKET}/checkpoints/e2e-sagemaker-view"}
    spec["output"] = {"s3_path": f"s3://{BUCKET}/models"}
    spec["hyperparameters"].update(
        {"epochs": EPOCHS, "epoch-sleep": EPOCH_SLEEP, "checkpoint-until-epoch": CHECKPOINT_UNTIL_EPOCH}
    )
    return load_spec(spec)


def _alarm_callback(context: Any) -> None:
    """What a user hangs on the alarm (a page, a chat message): here a line in the task's log."""
    print(f"{ALARM_CALLBACK_LINE}: {context['ti'].task_id}: {context.get('exception')}", flush=True)


with DAG(
    dag_id="adt_e2e_sagemaker_view",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow-dist-training", "e2e"],
    default_args={"on_failure_callback": _alarm_callback},
) as dag:
    stage_train_evaluate(
        spec=_spec(),
        group_id="sagemaker",
        backend="sagemaker",
        base_dir=REPO,
        region_name="us-east-1",
        checkpoints=CheckpointStep(freshness=CheckpointFreshness(max_age_seconds=MAX_AGE)),
        # the triggerer notices the end within seconds (the operator's default polls every 30 s)
        training_kwargs={"poll_interval": 3},
    )
