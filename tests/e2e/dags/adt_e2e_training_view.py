"""The demo pipeline's local group, paced to be watched: the Training view and OpenLineage e2e test.

The same steps as ``distributed_retraining``'s ``local`` group (stage -> train with 2 torchrun
processes -> checkpoints -> evaluate -> gate -> register) and the same demo spec, with
``epoch-sleep`` so every epoch takes a second or two: long enough for a browser to see the job
running. Unscheduled (triggered by the test), with its own registry group and checkpoint root, so
runs of the other e2e tests neither queue it nor become its champion.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG

from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.pipeline import CheckpointStep, EvaluationStep, RegistryStep, StagingStep
from airflow_dist_training.task_groups import stage_train_evaluate

REPO = Path(__file__).resolve().parents[3]
DEMO = Path(os.environ.get("ADT_DEMO_DIR") or REPO / ".adt-demo")


def _spec() -> Any:
    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml").model_dump(
        mode="json", exclude_unset=True
    )
    spec["source"]["source_dir"] = str(REPO / "examples")
    spec["channels"]["train"]["local_source"] = str(DEMO / "view-data" / "train")
    spec["checkpoint"]["local_uri"] = str(DEMO / "checkpoints" / "training-view")
    spec["output"]["local_uri"] = str(DEMO / "models")
    spec["hyperparameters"].update({"epochs": 8, "epoch-sleep": 1.5})
    return load_spec(spec)


with DAG(
    dag_id="adt_e2e_training_view",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["airflow-dist-training", "e2e"],
    # a task that cannot reach a loaded api-server at start-up fails before running: try again
    default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=10)},
) as dag:
    stage_train_evaluate(
        spec=_spec(),
        group_id="local",
        backend="local",
        base_dir=REPO,
        staging=StagingStep(channel="train", source=str(DEMO / "source" / "train")),
        checkpoints=CheckpointStep(
            resume="fresh",
            keep_last=2,
            keep_best=1,
            metric="loss",
            mode="min",
            promote_to=str(DEMO / "promoted" / "training-view"),
        ),
        evaluation=EvaluationStep(
            script="examples/evaluate.py",
            channel_source=str(DEMO / "source" / "test"),
            dependencies=["airflow_dist_training/checkpointing.py"],
        ),
        gate={
            "thresholds": {
                "accuracy": {"min": 0.8, "no_regression": True},
                "loss": {"direction": "lower_is_better", "max": 0.8},
            }
        },
        registry=RegistryStep(
            local_dir=str(DEMO / "view-registry"), model_package_group="adt-e2e-view", auto_approve=True
        ),
    )
