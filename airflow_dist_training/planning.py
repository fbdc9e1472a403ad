"""Plan one run of a training task: apply the run's overrides, validate, and describe the launch.

Used by the DAGs' ``plan`` task (the dry-run view of the trigger form): it shows the exact
request (SageMaker) or launch (local), the cost bound and the warnings, and launches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_dist_training.sagemaker.naming import job_name, run_identity, run_identity_hash
from airflow_dist_training.spec.overrides import RunOverrides, apply_overrides
from airflow_dist_training.spec.training import TrainingJobSpec

# What the plan task shares with the rest of the run (XCom keys).
PLAN_XCOM_KEYS = (
    "spec",
    "job_name",
    "backend",
    "dry_run",
    "summary",
    "request",
    "cost_bound_usd",
    "warnings",
)
# Params of a trigger form that are not spec overrides.
_NON_SPEC_PARAMS = {"backend", "dry_run"}


def overrides_from_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The spec overrides among a run's params (``None`` values keep the spec's)."""
    if not params:
        return {}
    known = set(RunOverrides.model_fields)
    return {k: v for k, v in params.items() if k in known and k not in _NON_SPEC_PARAMS and v is not None}


def plan_run(
    spec: TrainingJobSpec,
    *,
    backend: str,
    overrides: Mapping[str, Any] | None,
    train_task_id: str,
    context: Mapping[str, Any],
    aws_conn_id: str | None = None,
    region_name: str | None = None,
    base_dir: str | None = None,
) -> dict[str, Any]:
    """Return ``{"spec", "job_name", "backend", "summary", "warnings", "cost_bound_usd", "request"}``."""
    from airflow_dist_training.form_limits import check_form_limits

    check_form_limits(context)  # out-of-range form values are refused, never clamped into a run
    effective = apply_overrides(spec, overrides_from_params(overrides))
    ti = context.get("ti")
    identity = run_identity(
        getattr(ti, "dag_id", "dag"), train_task_id, str(context.get("run_id", "manual")), -1
    )
    name = job_name(effective.name, identity)
    result: dict[str, Any] = {
        "spec": effective.model_dump(mode="json", exclude_unset=True),
        "job_name": name,
        "backend": backend,
        "request": None,
        "cost_bound_usd": None,
    }
    from airflow_dist_training.hooks.backends import get_backend

    training_backend = get_backend(
        backend, aws_conn_id=aws_conn_id, region_name=region_name, local_hook_kwargs={"base_dir": base_dir}
    )
    # the local plan needs no AWS region lookup: its request is planned for a stand-in region
    region = region_name or (_connection_region(aws_conn_id) if training_backend.remote else "us-east-1")
    # the tag carries the identity's hash, as the training task sends it: the plan shows the request sent
    planned = training_backend.plan(
        effective, job_name=name, region=region, run_identity=run_identity_hash(identity)
    )
    lines = [planned["summary"]]
    warnings = list(planned["warnings"])
    result["request"] = planned["request"]
    result["cost_bound_usd"] = planned["cost_bound_usd"]
    result["warnings"] = warnings
    result["summary"] = "\n".join(
        lines + [f"WARNING          {w}" for w in warnings if w not in "\n".join(lines)]
    )
    return result


def _connection_region(aws_conn_id: str | None) -> str:
    from airflow_dist_training.hooks.aws import task_region

    return task_region(aws_conn_id)
