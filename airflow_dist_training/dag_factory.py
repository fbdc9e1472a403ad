"""YAML pipelines -> DAGs: one DAG per YAML file.

A pipeline file holds the schedule, the training spec (inline or a path), staging, checkpoint
policy, evaluation, gate and registry (see ``PipelineSpec``). Next to each ``<name>.yaml`` sits a
two-line ``<name>.py`` that calls ``dag_from_yaml(__file__)``, so a broken YAML file shows up as
*that* file's import error in Airflow, with the field path, and never breaks the other DAGs::

    from airflow_dist_training.dag_factory import dag_from_yaml

    dag = dag_from_yaml(__file__)

Parsing is cheap: YAML (C loader when available), pydantic validation and operator construction;
no AWS call, no heavy import (``bench/dag_factory.py`` measures it).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

# load_pipeline lives with the pipeline checks (pure core); importable from here as before
from airflow_dist_training.pipeline_checks import load_pipeline

if TYPE_CHECKING:
    from airflow_dist_training.spec.pipeline import PipelineSpec

__all__ = ["build_dag", "dag_from_yaml", "load_pipeline"]

_DRAFT_07 = {"$schema": "http://json-schema.org/draft-07/schema#"}


def build_dag(pipeline: PipelineSpec, *, base_dir: str | Path, fileloc: str | None = None) -> Any:
    """The DAG for ``pipeline``: schedule (cron + time zone, and/or assets) and the task group."""
    import pendulum

    from airflow_dist_training.compat import DAG, Asset, AssetOrTimeSchedule, CronTriggerTimetable, Param
    from airflow_dist_training.task_groups import stage_train_evaluate

    timezone = pendulum.timezone(pipeline.timezone)
    schedule: Any = None
    assets = [Asset(uri) for uri in pipeline.assets]
    if pipeline.schedule and assets:
        schedule = AssetOrTimeSchedule(
            timetable=CronTriggerTimetable(pipeline.schedule, timezone=timezone), assets=_any(assets)
        )
    elif pipeline.schedule:
        schedule = (
            CronTriggerTimetable(pipeline.schedule, timezone=timezone)
            if not pipeline.schedule.startswith("@")
            else pipeline.schedule
        )
    elif assets:
        schedule = _any(assets)
    dag = DAG(
        dag_id=pipeline.dag_id,
        description=pipeline.description,
        schedule=schedule,
        start_date=pendulum.instance(datetime.fromisoformat(pipeline.start_date), tz=timezone),
        catchup=False,
        max_active_runs=1,
        tags=["airflow-dist-training", pipeline.backend, *pipeline.tags],
        default_args={"owner": pipeline.owner, "retries": pipeline.retries},
    )
    if fileloc:
        dag.fileloc = fileloc
    group: Any = stage_train_evaluate
    fan_out: dict[str, Any] = {"members": pipeline.for_each, "tuning": pipeline.tuning}  # one model per member, or one
    if pipeline.sweep is not None:  # members from hyperparameter sets, the best one registered
        from airflow_dist_training.sweep_groups import sweep_train_evaluate

        group, fan_out = sweep_train_evaluate, {"sweep": pipeline.sweep, "group_id": "stage_train_evaluate"}
    with dag:
        group(
            spec=pipeline.training,
            backend=pipeline.backend,
            staging=pipeline.staging,
            checkpoints=pipeline.checkpoints,
            evaluation=pipeline.evaluation,
            gate=pipeline.gate.model_dump(mode="json") if pipeline.gate else None,
            fail_on_reject=pipeline.fail_on_reject,
            registry=pipeline.registry,
            aws_conn_id=pipeline.aws_conn_id,
            region_name=pipeline.region_name,
            base_dir=base_dir,
            force=pipeline.force,
            warm_start=pipeline.warm_start,
            deferrable=pipeline.deferrable,
            **fan_out,
        )
    # The trigger form, set once the tasks exist: every operator's constructor deep-copies the
    # DAG's params (once per class in its hierarchy, 4,000 copies for 200 pipelines, a fifth of
    # their parse). A run merges the DAG's params into each task's, so the tasks need no copy.
    # Added to the DAG's (empty) params, not assigned: assigning makes Airflow check each default
    # against its schema, the schema against its meta-schema first (0.2 ms a param, at every parse).
    # The defaults are the pipeline's values, which its model has validated against the same
    # choices. The draft-07 schemas keep a run's check of the form's values cheap.
    dag.params.update(
        {
            "force": Param(
                pipeline.force,
                description="Train even when data, code and spec equal the champion's",
                schema={**_DRAFT_07, "type": "boolean", "title": "Force training"},
            ),
            "warm_start": Param(
                pipeline.warm_start,
                description="Initialise from the champion's model or the last promoted checkpoint",
                schema={**_DRAFT_07, "enum": ["none", "champion", "promoted"], "title": "Warm start"},
            ),
        }
    )
    return dag


def _any(assets: list[Any]) -> Any:
    if len(assets) == 1:
        return assets[0]
    from airflow.sdk import AssetAny

    return AssetAny(*assets)


def dag_from_yaml(
    python_file: str, yaml_file: str | None = None, *, base_dir: str | Path | None = None
) -> Any:
    """Build the DAG of the YAML file next to ``python_file`` (same stem, ``.yaml``/``.yml``)."""
    stub = Path(python_file)
    if yaml_file is None:
        candidates = [stub.with_suffix(".yaml"), stub.with_suffix(".yml")]
        path = next((c for c in candidates if c.exists()), candidates[0])
    else:
        path = Path(yaml_file) if Path(yaml_file).is_absolute() else stub.parent / yaml_file
    pipeline = load_pipeline(path)
    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.pipeline_checks import check_pipeline

    # the cheap checks are this file's import error now; planning is the plan task's (never at parse)
    problems, _ = check_pipeline(pipeline, path=path, plan_job=False)
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise SpecValidationError(errors, source=str(path))
    return build_dag(pipeline, base_dir=base_dir or path.parent, fileloc=str(stub))
