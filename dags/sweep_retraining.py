"""A hyperparameter sweep, kept to the best: four sets trained side by side, one model registered.

``sweep_train_evaluate`` trains every set of the grid (lr x hidden) as one member of an Airflow
mapped task group, evaluates each, picks the member with the best evaluation accuracy, gates only
that winner against the group's champion and registers only it (model package group
``sweep-mlp``). Every member's metrics are in the summary. Local backend; generate the data first::

    python examples/make_dataset.py --out .adt-demo/source
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pendulum

from airflow_dist_training.compat import DAG, task
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.pipeline import CheckpointStep, EvaluationStep, RegistryStep
from airflow_dist_training.sweep_groups import sweep_train_evaluate

REPO = Path(__file__).resolve().parent.parent
DEMO = Path(os.environ.get("ADT_DEMO_DIR") or REPO / ".adt-demo")


def _spec() -> Any:
    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml").model_dump(
        mode="json", exclude_unset=True
    )
    spec["name"] = "sweep-mlp"
    spec["source"]["source_dir"] = str(REPO / "examples")
    spec["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    spec["distribution"]["processes_per_host"] = 1  # four members on one small machine
    spec["hyperparameters"]["epochs"] = 2
    spec["channels"]["train"]["local_source"] = str(DEMO / "source" / "train")
    spec["checkpoint"]["local_uri"] = str(DEMO / "checkpoints" / "sweep-mlp")
    spec["output"]["local_uri"] = str(DEMO / "models")
    return load_spec(spec)


SWEEP = {
    "strategy": "grid",
    "ranges": {"lr": [0.001, 0.1], "hidden": [8, 32]},
    "objective": {"metric": "accuracy", "type": "Maximize"},
}

with DAG(
    dag_id="sweep_retraining",
    description="A grid of four hyperparameter sets; the best one is gated and registered",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["airflow-dist-training", "sweep", "mapped"],
    default_args={"owner": "ml-platform", "retries": 0},
    doc_md=__doc__,
) as dag:
    sweep = sweep_train_evaluate(
        group_id="sweep",
        spec=_spec(),
        sweep=SWEEP,
        backend="local",
        base_dir=REPO,
        checkpoints=CheckpointStep(resume="fresh", keep_last=1, keep_best=0),
        evaluation=EvaluationStep(
            script="examples/evaluate.py",
            channel_source=str(DEMO / "source" / "test"),
            dependencies=[str(REPO / "airflow_dist_training" / "checkpointing.py")],
        ),
        gate={"thresholds": {"accuracy": {"min": 0.5, "no_regression": True}}},
        registry=RegistryStep(local_dir=str(DEMO / "registry"), auto_approve=True),
    )

    @task(task_id="summary", trigger_rule="all_done")
    def summary(**context: Any) -> dict[str, Any]:
        """Every member's metrics, the winner, the gate's decision and the registered version."""
        from airflow_dist_training.reporting import sweep_summary

        return sweep_summary(context, "sweep", write_to=DEMO / "last-sweep-summary.txt")

    sweep >> summary()
