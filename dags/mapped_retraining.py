"""One DAG run, one model per market: ``stage_train_evaluate`` mapped over three members.

Each member (``emea``, ``apac``, ``amer``) trains the demo MLP on its own market's data with its own
overrides, as one map index of an Airflow mapped task group: its own job name, checkpoints,
champion, skip-unchanged decision, quality gate and model package group (``market-mlp-<member>``).
A member whose data and code equal its champion's is skipped; one member failing does not stop the
others. The summary lists every member. ``backend=local`` (the default) runs each member's job on
this machine (torchrun on CPU under the SageMaker container contract), reading its market's local
data; generate it first::

    for m in emea apac amer; do python examples/make_dataset.py --out .adt-demo/markets/$m; done

``backend=sagemaker`` launches SageMaker training jobs reading each market's S3 prefix, evaluates
each member with a processing job and registers it in its own SageMaker model package group.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pendulum

from airflow_dist_training.compat import DAG, Param, task
from airflow_dist_training.spec.backends import backend_names
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.pipeline import CheckpointStep, EvaluationStep, RegistryStep
from airflow_dist_training.task_groups import stage_train_evaluate

REPO = Path(__file__).resolve().parent.parent
DEMO = Path(os.environ.get("ADT_DEMO_DIR") or REPO / ".adt-demo")
MARKETS = DEMO / "markets"


def _spec() -> Any:
    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml").model_dump(
        mode="json", exclude_unset=True
    )
    spec["name"] = "market-mlp"
    spec["source"]["source_dir"] = str(REPO / "examples")
    spec["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    spec["distribution"]["processes_per_host"] = 1  # three members on one small machine
    spec["hyperparameters"]["epochs"] = 2
    spec["checkpoint"]["local_uri"] = str(DEMO / "checkpoints" / "market-mlp")
    spec["output"]["local_uri"] = str(DEMO / "models")
    return load_spec(spec)


def _market(name: str, **overrides: Any) -> dict[str, Any]:
    """A member reading its market's data (and, on SageMaker, its market's S3 prefix)."""
    train = {
        "uri": f"s3://adt-demo-bucket/markets/{name}/train",
        "local_source": str(MARKETS / name / "train"),
    }
    return {"name": name, "channels": {"train": train}, **overrides}


MEMBERS = [
    _market("emea"),
    _market("apac", hyperparameters={"lr": 0.1}),
    _market("amer", hyperparameters={"hidden": 16}),
]

with DAG(
    dag_id="mapped_retraining",
    description="One model per market: a mapped stage_train_evaluate group",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["airflow-dist-training", "retraining", "mapped"],
    default_args={"owner": "ml-platform", "retries": 0},
    params={
        "backend": Param(
            "local",
            enum=list(backend_names()),
            title="Backend",
            description="local: torchrun on this machine (CPU); sagemaker: SageMaker training and "
            "processing jobs (and any other registered backend)",
        ),
        "force": Param(
            False, type="boolean", title="Force training", description="Train every member anyway"
        ),
    },
    doc_md=__doc__,
) as dag:

    @task.branch(task_id="choose_backend")
    def choose_backend(**context: Any) -> str:
        return f"{context['params']['backend']}.plan"

    common: dict[str, Any] = {
        "spec": _spec(),
        "base_dir": REPO,
        "checkpoints": CheckpointStep(resume="fresh", keep_last=1, keep_best=0),
        "evaluation": EvaluationStep(
            script="examples/evaluate.py",
            channel_source=str(DEMO / "markets" / "holdout" / "test"),
            dependencies=[str(REPO / "airflow_dist_training" / "checkpointing.py")],
        ),
        "gate": {"thresholds": {"accuracy": {"min": 0.5}}},
        # in the backend's own registry kind (its record's default_registry), a group per member
        "registry": RegistryStep(
            local_dir=str(DEMO / "registry"), model_package_group="market-mlp", auto_approve=True
        ),
    }
    # one mapped group per registered backend, named after it; the run's backend param picks one
    groups = [
        stage_train_evaluate(group_id=name, backend=name, members=MEMBERS, **common)
        for name in backend_names()
    ]

    # all_done: the summary lists every member of the chosen backend, those that failed too
    @task(task_id="summary", trigger_rule="all_done")
    def summary(**context: Any) -> dict[str, Any]:
        """Every member's result: trained or skipped (and why), metrics, gate, where its model went."""
        from airflow_dist_training.reporting import run_summary

        names = [m["name"] for m in MEMBERS]
        return run_summary(
            context, list(backend_names()), write_to=DEMO / "last-mapped-run-summary.txt", members=names
        )

    choose_backend() >> groups >> summary()
