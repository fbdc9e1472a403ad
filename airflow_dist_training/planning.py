"""Plan one run of a training task: apply the run's overrides, validate, and describe the launch.

Used by the DAGs' ``plan`` task (the dry-run view of the trigger form): it shows the exact
request (SageMaker) or launch (local), the cost bound and the warnings, and launches nothing.
The training task sends this request (``DistributedTrainingOperator(planned_request=...)``)
unless the run's state changed it, and then logs what changed (``request_changes``).

Pure: the caller hands in the backend and the region (``hooks/backends.py`` ``plan_on_backend``
for the plan task); nothing here imports a hook.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Protocol

from airflow_dist_training.sagemaker.naming import job_name, run_identity, run_identity_hash
from airflow_dist_training.sagemaker.uploads import Upload
from airflow_dist_training.spec.backends import BackendRecord
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
    "uploads",
    "cost_bound_usd",
    "warnings",
)
# Params of a trigger form that are not spec overrides.
_NON_SPEC_PARAMS = {"backend", "dry_run"}


class PlanningBackend(Protocol):
    """What planning needs of a training backend (``hooks/backends.TrainingBackend`` has it)."""

    record: BackendRecord

    def plan(
        self, spec: TrainingJobSpec, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]: ...


def overrides_from_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The spec overrides among a run's params (``None`` values keep the spec's)."""
    if not params:
        return {}
    known = set(RunOverrides.model_fields)
    return {k: v for k, v in params.items() if k in known and k not in _NON_SPEC_PARAMS and v is not None}


def uploads_to_xcom(uploads: list[Upload]) -> list[dict[str, Any]]:
    """The plan's uploads as JSON for XCom (file contents base64), so the training task sends them."""
    return [
        {
            "s3_uri": u.s3_uri,
            "kind": u.kind,
            "local_path": u.local_path,
            "content": base64.b64encode(u.content).decode("ascii") if u.content is not None else None,
            "kms_key": u.kms_key,
            "dependencies": list(u.dependencies),
        }
        for u in uploads
    ]


def uploads_from_xcom(data: list[Mapping[str, Any]]) -> list[Upload]:
    """The inverse of :func:`uploads_to_xcom`."""
    return [
        Upload(
            s3_uri=str(d["s3_uri"]),
            kind=str(d["kind"]),
            local_path=d.get("local_path"),
            content=base64.b64decode(d["content"]) if d.get("content") is not None else None,
            kms_key=d.get("kms_key"),
            dependencies=tuple(d.get("dependencies") or ()),
        )
        for d in data
    ]


def plan_run(
    spec: TrainingJobSpec,
    *,
    backend: PlanningBackend,
    region: str,
    overrides: Mapping[str, Any] | None,
    train_task_id: str,
    context: Mapping[str, Any],
    checkpoint_resume: str | None = None,
    base_dir: str | None = None,
) -> dict[str, Any]:
    """Return ``{"spec", "job_name", "backend", "summary", "warnings", "cost_bound_usd", "request", "uploads"}``.

    With a ``checkpoint_resume`` policy the request checkpoints where the training task's first
    job does (the run's own prefix, ``checkpoints/resume.run_checkpoint_location``), so the
    request shown is the one sent; the ``spec`` returned keeps the spec's checkpoint root.
    """
    from airflow_dist_training.form_limits import check_form_limits

    check_form_limits(context)  # out-of-range form values are refused, never clamped into a run
    effective = apply_overrides(spec, overrides_from_params(overrides))
    ti = context.get("ti")
    identity = run_identity(
        getattr(ti, "dag_id", "dag"), train_task_id, str(context.get("run_id", "manual")), -1
    )
    name = job_name(effective.name, identity)
    # the tag carries the identity's hash, as the training task sends it: the plan shows the request sent
    planned = backend.plan(
        _run_scoped(effective, checkpoint_resume, name, remote=backend.record.on_aws, base_dir=base_dir),
        job_name=name,
        region=region,
        run_identity=run_identity_hash(identity),
    )
    warnings = list(planned["warnings"])
    summary = planned["summary"]
    return {
        "spec": effective.model_dump(mode="json", exclude_unset=True),
        "job_name": name,
        "backend": backend.record.name,
        "request": planned["request"],
        "uploads": uploads_to_xcom(list(planned.get("uploads") or [])),
        "cost_bound_usd": planned["cost_bound_usd"],
        "warnings": warnings,
        "summary": "\n".join([summary] + [f"WARNING          {w}" for w in warnings if w not in summary]),
    }


def _run_scoped(
    spec: TrainingJobSpec, policy: str | None, name: str, *, remote: bool, base_dir: str | None
) -> TrainingJobSpec:
    """The spec as the training task's first job sends it: checkpoints under the run's own prefix."""
    from airflow_dist_training.checkpoints.resume import run_checkpoint_location

    if policy is None:
        return spec
    run = run_checkpoint_location(spec, policy, run_key=name, job_name=name, local=not remote, base_dir=base_dir)
    return run.spec if run is not None else spec
