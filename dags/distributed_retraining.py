"""Scheduled distributed retraining: stage -> train -> checkpoints -> evaluate -> gate -> register.

Runs every Monday 03:00 Europe/Amsterdam, and whenever the training data asset is updated.
Triggered from the UI, the trigger form validates its inputs (backend, instance type, count,
strategy, epochs, learning rate, spot and its interruption budget, dry run, force, warm start). A run whose data, code and
spec equal the champion's is skipped with the reason (``force`` trains anyway); a new evaluation set
alone re-evaluates the champion's model without training, while that model is still there. ``backend=local`` (the default) runs the job
on this machine with torchrun on CPU under the SageMaker container contract; ``sagemaker``
launches it on SageMaker. ``dry_run`` shows the plan (request, cost bound, warnings) and launches
nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pendulum

from airflow_dist_training.compat import DAG, Asset, AssetOrTimeSchedule, CronTriggerTimetable, Param, task
from airflow_dist_training.form_limits import limited_param_schema
from airflow_dist_training.sagemaker.catalog import instance_catalog
from airflow_dist_training.spec.backends import backend_names, backend_record
from airflow_dist_training.spec.loading import load_spec
from airflow_dist_training.spec.pipeline import (
    CheckpointFreshness,
    CheckpointStep,
    EvaluationStep,
    RegistryStep,
    StagingStep,
)
from airflow_dist_training.spec.training import Strategy
from airflow_dist_training.task_groups import stage_train_evaluate

REPO = Path(__file__).resolve().parent.parent
# Where the local backend's data, checkpoints, models and registry live (the demo's workspace).
DEMO = Path(os.environ.get("ADT_DEMO_DIR") or REPO / ".adt-demo")
# Where its checkpoints and models live: a folder, or a URI in any registered store (storage/)
STORE = os.environ.get("ADT_DEMO_STORE") or str(DEMO)
# The registry kind (default: the backend's own); e.g. mlflow, at the server MLFLOW_TRACKING_URI names
REGISTRY_KIND = os.environ.get("ADT_DEMO_REGISTRY") or None


def _demo_spec() -> Any:
    spec = load_spec(REPO / "examples" / "specs" / "local_demo.yaml").model_dump(
        mode="json", exclude_unset=True
    )
    spec["source"]["source_dir"] = str(REPO / "examples")
    spec["source"]["dependencies"] = [str(REPO / "airflow_dist_training" / "checkpointing.py")]
    spec["channels"]["train"]["local_source"] = str(DEMO / "data" / "train")
    spec["checkpoint"]["local_uri"] = f"{STORE}/checkpoints/local-demo"
    spec["output"]["local_uri"] = f"{STORE}/models"
    return load_spec(spec)


SPEC = _demo_spec()
TIMEZONE = pendulum.timezone("Europe/Amsterdam")
TRAINING_DATA = Asset("s3://adt-demo-bucket/data/train/")  # upstream: its updates trigger a run
# what staging put where the job reads it (the event's extra holds its data fingerprint); a
# different asset than TRAINING_DATA, or every run would trigger the next one
STAGED_DATA = Asset((DEMO / "data" / "train").resolve().as_uri())
GATE = {
    "thresholds": {
        "accuracy": {"min": 0.8, "no_regression": True},
        "loss": {"direction": "lower_is_better", "max": 0.8},
    }
}

with DAG(
    dag_id="distributed_retraining",
    description="Distributed retraining with checkpoints, a quality gate and model registration",
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 3 * * 1", timezone=TIMEZONE), assets=TRAINING_DATA
    ),
    start_date=pendulum.datetime(2026, 1, 1, tz=TIMEZONE),
    catchup=False,
    max_active_runs=1,
    tags=["airflow-dist-training", "retraining"],
    default_args={"owner": "ml-platform", "retries": 1, "retry_delay": pendulum.duration(minutes=5)},
    params={
        "backend": Param(
            "local",
            enum=list(backend_names()),
            title="Backend",
            description="local: torchrun on this machine (CPU); sagemaker: a SageMaker training job "
            "(and any other registered backend)",
        ),
        "instance_type": Param(
            SPEC.compute.instance_type,
            enum=sorted(instance_catalog()),
            title="Instance type",
            description="SageMaker instance type (devices per instance come from the catalog)",
        ),
        # limits via x-maximum: a schema maximum would make the form clamp silently (form_limits.py)
        "instance_count": Param(
            SPEC.compute.count,
            type="integer",
            minimum=1,
            title="Instance count (at most 16)",
            description="More than 16 is refused by the plan task; nothing launches",
            **limited_param_schema(16),
        ),
        "strategy": Param(
            SPEC.distribution.strategy.value,
            enum=[s.value for s in Strategy],
            title="Distribution strategy",
        ),
        "epochs": Param(
            int(SPEC.hyperparameters.get("epochs", 6)),
            type="integer",
            minimum=1,
            title="Epochs (at most 1000)",
            **limited_param_schema(1000),
        ),
        "learning_rate": Param(
            float(SPEC.hyperparameters.get("lr", 0.05)),
            type="number",
            exclusiveMinimum=0,
            title="Learning rate (at most 10)",
            **limited_param_schema(10),
        ),
        "spot": Param(False, type="boolean", title="Managed spot training", description="SageMaker only"),
        "spot_max_interruptions": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Spot: interrupted jobs a run may replace",
            description="Managed spot: past this many interruptions the training task fails with the reason "
            "(empty: the spec's, at most 50 jobs)",
        ),
        "spot_on_demand_after": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Spot: on-demand after this many interruptions",
            description="Managed spot: the run's next job runs on on-demand instances and resumes from the "
            "run's last complete checkpoint (empty: the spec's; none: stay on spot)",
        ),
        "inference_image": Param(
            "",
            type="string",
            title="Inference image",
            description="SageMaker: the image the registered model package is served with "
            "(empty: the training image)",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Show the plan (request, cost, warnings); launch nothing",
        ),
        "force": Param(
            False,
            type="boolean",
            title="Force training",
            description="Train even when data, code and spec equal the champion's (otherwise skipped)",
        ),
        "evaluation_dependencies": Param(
            ["airflow_dist_training/checkpointing.py"],
            type="array",
            items={"type": "string"},
            title="Evaluation dependencies",
            description="Files or folders of this project (relative to its folder) shipped with the "
            "evaluation script, as the training code ships its own; the image has nothing else",
        ),
        "warm_start": Param(
            "none",
            enum=["none", "champion", "promoted"],
            title="Warm start",
            description="Initialise from the champion's model or the last promoted checkpoint "
            "(channel warm_start); the run still trains all its epochs",
        ),
    },
    doc_md=__doc__,
) as dag:

    @task.branch(task_id="choose_backend")
    def choose_backend(**context: Any) -> str:
        return f"{context['params']['backend']}.plan"

    common: dict[str, Any] = {
        "spec": SPEC,
        "base_dir": REPO,
        # resume is per run (retries resume the run's own checkpoints; a new run starts fresh);
        # each run's best checkpoint is published to a stable location (warm_start: promoted)
        "checkpoints": CheckpointStep(
            resume="fresh",
            keep_last=2,
            keep_best=1,
            metric="loss",
            mode="min",
            promote_to=f"{STORE}/checkpoints/promoted",
            # sagemaker: watch_checkpoints fails (callbacks fire) when the running job writes no new
            # complete checkpoint for 10 minutes; the job runs on
            freshness=CheckpointFreshness(max_age_seconds=600, on_stall="alarm"),
        ),
        # evaluate.py imports train.py (shipped: it is beside it), which imports the checkpoint
        # helper: AWS's images lack it, so it ships with the script, as with the training code
        "evaluation": EvaluationStep(
            script="examples/evaluate.py",
            channel_source=str(DEMO / "source" / "test"),
            dependencies=[str(REPO / "airflow_dist_training" / "checkpointing.py")],
        ),
        "gate": GATE,
        "registry": RegistryStep(
            kind=REGISTRY_KIND, local_dir=str(DEMO / "registry"), model_package_group="adt-demo", auto_approve=True
        ),
    }
    # one group per registered backend, named after it; the run's backend param picks one.
    # Backends that stage into a directory stage the demo's data; FSx staging needs a file system.
    groups = []
    for name in backend_names():
        directory_staging = backend_record(name).staging == "directory"
        group = stage_train_evaluate(
            group_id=name,
            backend=name,
            staging=StagingStep(channel="train", source=str(DEMO / "source" / "train")) if directory_staging else None,
            data_asset=STAGED_DATA if directory_staging else None,
            **common,
        )
        groups.append(group)

    # none_failed: a skipped run (nothing changed, dry run) still says why
    @task(task_id="summary", trigger_rule="none_failed")
    def summary(**context: Any) -> dict[str, Any]:
        """A readable summary: metrics, the gate decision, and where the model went."""
        from airflow_dist_training.reporting import run_summary

        return run_summary(context, groups=list(backend_names()), write_to=DEMO / "last-run-summary.txt")

    choose_backend() >> groups >> summary()
