"""A training run in the task: its spec, its backend, its plan and the job its state makes.

The spec is found beside the DAG file, rendered (a YAML file's content is templated too) and
validated in the task, its secret-looking environment values masked in the task log; the backend
is resolved by its registered name (``spec/backends.py``), with no I/O until it is called (the
training and tuning operators share this). The training task's plan is its plan task's, else made
here once; each job of the run is that plan with the run's state applied (``planning``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.compat import AirflowFailException
from airflow_dist_training.hooks.backends import operator_backend
from airflow_dist_training.sagemaker.naming import identity_from_context
from airflow_dist_training.spec.backends import backend_record

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.planning import RunJob, RunPlan
    from airflow_dist_training.spec.training import TrainingJobSpec

SECRET_KEY = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|KEY|CREDENTIAL", re.IGNORECASE)


def mask_spec_secrets(spec: Any) -> list[str]:
    """Register the values of secret-looking environment keys with Airflow's secrets masker.

    Works on a spec object or a dict; returns the masked keys. Registered values are replaced by
    ``***`` in task logs and rendered template fields.
    """
    from airflow.sdk.log import mask_secret

    env = (spec.get("environment") if isinstance(spec, Mapping) else getattr(spec, "environment", None)) or {}
    secrets = [(str(key), str(value)) for key, value in env.items() if SECRET_KEY.search(str(key)) and value]
    for key, value in secrets:
        mask_secret(value, key)
    return [key for key, _ in secrets]


def beside_dag(operator: Any, source: Any) -> Any:
    """A relative ``.yaml`` path, looked up next to the operator's DAG file first; any other source as it is."""
    if isinstance(source, str) and source.strip().endswith((".yaml", ".yml")) and "\n" not in source:
        path = Path(source.strip())
        if not path.is_absolute() and operator.dag is not None and getattr(operator.dag, "fileloc", None):
            candidate = Path(operator.dag.fileloc).parent / path
            return str(candidate) if candidate.exists() else source
    return source


class SpecBackendMixin:
    """A training spec run on a registered backend: the training and tuning operators' plumbing."""

    spec: Any
    render_template: Any  # BaseOperator's

    def _set_spec_backend(self, spec: Any, backend: str, local_hook_kwargs: dict[str, Any] | None) -> None:
        backend_record(backend)  # a registered name (SpecValidationError naming the registered ones)
        self.spec = str(spec) if isinstance(spec, Path) else spec
        self.backend = backend
        self.local_hook_kwargs = local_hook_kwargs or {}

    training_backend = cached_property(operator_backend)  # where the jobs run; no I/O until called

    def _load_spec(self, context: Context) -> TrainingJobSpec:
        """The spec, validated: a YAML file beside the DAG, its content rendered with Jinja."""
        from airflow_dist_training.spec.loading import load_spec

        source = beside_dag(self, self.spec)
        if isinstance(source, str) and source.strip().endswith((".yaml", ".yml")) and "\n" not in source:
            path = Path(source)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError:
                return load_spec(str(path))  # the loader's field-path error for a missing file
            if "{{" in text or "{%" in text:
                text = self.render_template(text, context)
            spec = load_spec(text) if text.strip() else load_spec(str(path))
        else:
            spec = load_spec(source)
        mask_spec_secrets(spec)
        return spec

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)  # type: ignore[misc]
        mask_spec_secrets(self.spec)  # secret-looking environment values never reach the task log


class RunPlanMixin(SpecBackendMixin):
    """The training operator's run: its plan (``_plan``) and its current job (``_launch``), the
    only forms of the spec the operator keeps."""

    _plan: RunPlan | None
    _launch: RunJob | None
    plan_task_id: str | None
    checkpoint_resume: str | None
    channels: Mapping[str, Any] | None
    warm_start_uri: str | None
    task_id: str
    dag_id: str
    has_dag: Any
    log: Any

    def _identity(self, context: Context) -> str:
        return identity_from_context(
            context, self.task_id, dag_id=self.dag_id if self.has_dag() else "no-dag"
        )

    def _run_plan(self, context: Context) -> RunPlan:
        """The run's plan: the plan task's (``plan_task_id``), else planned here, once."""
        if self._plan is None or self._plan.identity != self._identity(context):  # one per run
            self._launch = None
            self._plan = self._pulled_plan(context) or self._plan_here(context)
        return self._plan

    def _pulled_plan(self, context: Context) -> RunPlan | None:
        """The plan task's ``RunPlan``, or None without a plan task (or one that pushed none)."""
        from airflow_dist_training.planning import RUN_PLAN_XCOM_KEY, RunPlan

        ti = context.get("ti")
        if self.plan_task_id is None or ti is None:
            return None
        from airflow_dist_training.mapped_groups import pull_own

        data = pull_own(ti, self.plan_task_id, RUN_PLAN_XCOM_KEY)  # this member's plan in a mapped group
        if not isinstance(data, Mapping):
            return None
        plan = RunPlan.from_xcom(data)
        mine = (self._identity(context), self.backend, self.checkpoint_resume)
        if (plan.identity, plan.backend, plan.checkpoint_resume) != mine:
            raise AirflowFailException(
                f"{self.plan_task_id} planned the run {plan.identity} (backend {plan.backend!r}, "
                f"checkpoint_resume={plan.checkpoint_resume!r}), not this task's {mine[0]} (backend "
                f"{mine[1]!r}, checkpoint_resume={mine[2]!r}): plan_task_id must name this task's plan task"
            )
        mask_spec_secrets(plan.spec)
        return plan

    def _plan_here(self, context: Context) -> RunPlan:
        from airflow_dist_training.planning import plan_spec

        backend = self.training_backend
        return plan_spec(
            self._load_spec(context),
            backend=backend,
            region=backend.region(),
            identity=self._identity(context),
            checkpoint_resume=self.checkpoint_resume,
            base_dir=str(self.local_hook_kwargs.get("base_dir") or Path.cwd()),
            plan_request=backend.record.on_aws,  # a local job plans its request when it runs
        )

    def _run_job(self, context: Context, generation: int = 1, *, on_demand: bool = False) -> RunJob:
        """The run's ``generation``-th job: the plan with the run's state applied; logs what changed."""
        from airflow_dist_training.planning import RunState, apply_run_state

        warm_start = str(self.warm_start_uri or "").strip()
        state = RunState(
            generation=generation,
            on_demand=on_demand,
            channels=dict(self.channels or {}),
            warm_start_uri=warm_start if warm_start not in ("", "None") else None,
        )
        plan = self._run_plan(context)
        earlier = self._launch.state_spec if self._launch is not None else None
        job = apply_run_state(plan, state, backend=self.training_backend, state_spec=earlier)
        if state.warm_start_uri:
            self.log.info("Warm start: the script gets %s as channel warm_start", state.warm_start_uri)
        if not job.planned_again:
            if self.plan_task_id is not None and job.request is not None:
                self.log.info("Sending the request planned by %s (not planned again).", self.plan_task_id)
            return job
        if job.request is None and plan.request is not None:  # a local job: planned as it runs
            self.log.info("Staged channels or a warm start change the request %s planned.", self.plan_task_id)
        for warning in job.warnings:
            self.log.warning("Spec warning: %s", warning)
        if plan.request is not None and job.request is not None:
            self.log.info(
                "The run's state changed the request planned for %s (a resume, spot replacement, "
                "staged channels or warm start); %s is sent:\n  %s",
                plan.job_name_base,
                job.name,
                "\n  ".join(job.changes) or "(no difference)",
            )
        return job
