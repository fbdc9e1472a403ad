"""``DistributedTrainingOperator``: launch and watch one distributed training job, safely.

The order of ``execute`` is the design (``docs/training-operator.md``): the run's plan first (a
bad spec fails before any AWS call); a deterministic job name, described before it is created,
so a crash anywhere never creates a second job; a sync or deferred wait capped only by
``max_wait_seconds``/``execution_timeout``; only ``Completed`` is success; a spot interruption is
replaced by the run's next generation within the same try, on its own budget; ``on_kill`` stops
the job, and a stop this try did not ask for is replaced, not failed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.compat import (
    AirflowException,
    AirflowFailException,
    BaseOperator,
    ResumableJobMixin,
)
from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.hooks.aws import AwsConnectionMixin, local_region
from airflow_dist_training.job_states import ACTIVE_STATES, SUCCESS_STATES, TERMINAL_STATES
from airflow_dist_training.links import sagemaker as links
from airflow_dist_training.operators import default_deferrable
from airflow_dist_training.operators.checkpoints import checkpoint_store
from airflow_dist_training.sagemaker.naming import identity_from_context, run_identity_hash
from airflow_dist_training.storage.location import split_uri

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.checkpoints.resume import AttemptOutcome
    from airflow_dist_training.hooks.backends import DurableBackend, TrainingBackend
    from airflow_dist_training.planning import RunJob, RunPlan
    from airflow_dist_training.spec.training import TrainingJobSpec

SECRET_KEY = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|KEY|CREDENTIAL", re.IGNORECASE)
MAX_GENERATIONS = 50


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


def _outcome(desc: Mapping[str, Any]) -> AttemptOutcome:
    from airflow_dist_training.checkpoints.resume import classify_outcome

    return classify_outcome(
        desc.get("TrainingJobStatus"), desc.get("FailureReason"), desc.get("SecondaryStatus")
    )


def sagemaker_backend(operator: Any) -> DurableBackend:
    """The SageMaker backend (``hooks/backends.py``) on the operator's connection: jobs that outlive a task."""
    from airflow_dist_training.hooks.backends import get_backend

    return get_backend("sagemaker", aws_conn_id=operator.aws_conn_id, region_name=operator.region_name)  # type: ignore[return-value]


def _fault_point(name: str) -> None:
    from airflow_dist_training.hooks.training import _fault_point as fp

    fp(name)


class SpecBackendMixin:
    """A training spec run on a registered backend: the training and tuning operators' plumbing."""

    def _set_spec_backend(self, spec: Any, backend: str, local_hook_kwargs: dict[str, Any] | None) -> None:
        from airflow_dist_training.spec.backends import backend_record

        backend_record(backend)  # a registered name (SpecValidationError naming the registered ones)
        self.spec = str(spec) if isinstance(spec, Path) else spec
        self.backend = backend
        self.local_hook_kwargs = local_hook_kwargs or {}

    @cached_property
    def local_hook(self) -> Any:
        from airflow_dist_training.hooks.local_training import LocalTrainingHook

        return LocalTrainingHook(**self.local_hook_kwargs)

    @cached_property
    def training_backend(self) -> TrainingBackend:
        """Where the jobs run (``hooks/backends.py``); no I/O until a method is called."""
        from airflow_dist_training.hooks.backends import operator_backend

        return operator_backend(self)

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)  # type: ignore[misc]
        mask_spec_secrets(self.spec)  # secret-looking environment values never reach the task log


class DistributedTrainingOperator(AwsConnectionMixin, ResumableJobMixin, SpecBackendMixin, BaseOperator):
    """Run a distributed training job on SageMaker (or locally with torchrun) from a spec.

    :param spec: a ``TrainingJobSpec``, a dict, or the path of a YAML file (templated; a YAML
        file's content is rendered with Jinja too).
    :param backend: a registered backend (``spec/backends.py``): ``"sagemaker"``, ``"local"``
        (torchrun on the worker) or one a package registers.
    :param aws_conn_id: Airflow AWS connection (``None``: boto3's default chain).
    :param region_name: AWS region (default: the connection's).
    :param deferrable: wait in the triggerer; default ``[operators] default_deferrable``.
    :param max_wait_seconds: the only limit on the wait; ``None`` waits as long as the job runs.
        When exceeded the job is stopped (``stop_on_timeout``) and the task fails.
    :param stop_on_timeout: stop the job when ``max_wait_seconds`` is exceeded (default True).
    :param poll_interval: seconds between status checks.
    :param stream_logs: copy CloudWatch logs (all hosts, merged) into the task log.
    :param durable: persist the job name in ``task_state_store`` (Airflow 3.3 durable execution).
    :param local_hook_kwargs: keyword arguments of ``LocalTrainingHook`` (local backend).
    :param checkpoint_resume: resume policy (``fresh``/``latest``/``none``), or ``None`` to use the
        spec's checkpoint location as it is. With a policy, each run checkpoints to
        ``<spec checkpoint root>/<run key>/`` (shared by its retries, so a retry after a spot
        interruption or failure resumes from the run's latest complete checkpoint); ``latest`` is
        the same (a new run never resumes another run's checkpoint: use ``warm_start_uri``);
        ``none`` gives every job an empty location.
    :param channels: channels merged over the spec's (templated), e.g. the FSx channel that
        ``FSxStagePrefixOperator`` returns: ``{"train": stage.output}``.
    :param warm_start_uri: initialise the model from these weights (templated; empty: from
        scratch): a model artifact or a checkpoint directory, handed to the script as the input
        channel ``warm_start`` (``SM_CHANNEL_WARM_START``). The run still trains all its epochs.
    :param plan_task_id: the task that planned this run (``planning.plan_run``; its XCom
        ``run_plan``): SageMaker gets that request, not one planned again, unless the run's state
        changed it (the difference is logged). ``None``: the task plans the run itself, once.
    """

    template_fields: Sequence[str] = ("spec", "channels", "aws_conn_id", "region_name", "warm_start_uri")
    template_fields_renderers = {"spec": "json"}
    ui_color = "#f3e5d8"
    operator_extra_links = links.ALL_LINKS
    external_id_key = "sagemaker_training_job_name"

    def __init__(
        self,
        *,
        spec: TrainingJobSpec | Mapping[str, Any] | str | Path,
        backend: str = "sagemaker",
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        deferrable: bool | None = None,
        max_wait_seconds: float | None = None,
        stop_on_timeout: bool = True,
        poll_interval: float = 30,
        stream_logs: bool = True,
        local_hook_kwargs: dict[str, Any] | None = None,
        checkpoint_resume: str | None = None,
        channels: Mapping[str, Any] | None = None,
        warm_start_uri: str | None = None,
        plan_task_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_spec_backend(spec, backend, local_hook_kwargs)
        self._set_aws_connection(aws_conn_id, region_name)
        self.deferrable = default_deferrable(deferrable)
        self.max_wait_seconds = max_wait_seconds
        self.stop_on_timeout = stop_on_timeout
        self.poll_interval = poll_interval
        self.stream_logs = stream_logs
        if checkpoint_resume not in (None, "fresh", "latest", "none"):
            raise ValueError("checkpoint_resume must be 'fresh', 'latest', 'none' or None")
        self.checkpoint_resume = checkpoint_resume
        self.channels = channels
        self.warm_start_uri = warm_start_uri
        self.plan_task_id = plan_task_id
        self._job_name: str | None = None
        self._plan: RunPlan | None = None
        self._spec_obj: TrainingJobSpec | None = None  # the spec of the run's current job
        self._loaded_spec: TrainingJobSpec | None = None  # the spec as loaded, when planned here
        self._launch: RunJob | None = None  # the job this try creates (or created)
        self._description: dict[str, Any] | None = None
        self._stopped_here = False  # this try asked for the stop (on_kill)

    @cached_property
    def hook(self) -> Any:
        """The backend's hook (``SageMakerTrainingHook`` on SageMaker)."""
        return self.training_backend.hook  # type: ignore[attr-defined]

    @property
    def job_backend(self) -> DurableBackend:
        """The backend of a job that outlives the worker (``record.durable``): the only way the
        durable path reaches the job."""
        return self.training_backend  # type: ignore[return-value]

    def _load_spec(self, context: Context) -> TrainingJobSpec:
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
            spec = load_spec(source)  # type: ignore[arg-type]
        mask_spec_secrets(spec)
        return spec

    def _prepare_run_checkpoints(self) -> None:
        """Before the run's next job starts: move its incomplete checkpoints aside, log where it resumes.

        Resume is scoped to the run: retries and spot replacements of this run find its own
        checkpoints (SageMaker restores ``run.run_uri`` into ``/opt/ml/checkpoints``). A new run
        never resumes another run's checkpoint, whatever the policy (``latest`` once did, and a
        scheduled pipeline then trained zero epochs per run); initialising from earlier weights is
        the explicit ``warm_start`` channel instead (see ``docs/retraining.md``).
        """
        from airflow_dist_training.hooks.checkpoints import prepare_run_checkpoints

        plan = self._plan
        run_uri = plan.run_checkpoint_uri if plan is not None else None
        if plan is None or run_uri is None or self.checkpoint_resume == "none":
            return
        prepare_run_checkpoints(self.checkpoint_hook, run_uri, self.log)

    @cached_property
    def checkpoint_hook(self) -> Any:
        """The checkpoint hook on this task's connection, for the layout the run's spec names."""
        checkpoint = (self._plan.spec.get("checkpoint") if self._plan is not None else None) or {}
        return checkpoint_store(self, layout=checkpoint.get("layout"), step_pattern=checkpoint.get("step_pattern"))

    def _identity(self, context: Context) -> str:
        return identity_from_context(context, self.task_id, dag_id=self.dag_id if self.has_dag() else "no-dag")

    def _run_plan(self, context: Context) -> RunPlan:
        """The run's plan: the plan task's (``plan_task_id``), else planned here, once."""
        if self._plan is None or self._plan.identity != self._identity(context):  # one per run
            self._launch = self._loaded_spec = None
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
        self._loaded_spec = self._load_spec(context)
        return plan_spec(
            self._loaded_spec,
            backend=backend,
            region=self.job_backend.region() if backend.record.on_aws else local_region(self.region_name),
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
        validated = self._launch.state_spec if self._launch is not None else self._loaded_spec
        if self._launch is None and (state.channels or state.warm_start_uri):
            validated = None  # the loaded spec has not got the state's channels
        job = apply_run_state(plan, state, state_spec=validated)
        self._spec_obj = job.spec
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

    def execute(self, context: Context) -> Any:
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        with failing_fast_without_retry_policy():
            if not self.training_backend.record.durable:  # the job lives in this process: run it attached
                return self._execute_local(context)
            # The first generation's request now: a spec the planner rejects fails before any AWS call.
            self._launch = self._run_job(context)
            return self._replacing_interrupted_jobs(context, lambda: self.execute_resumable(context))

    def _replacing_interrupted_jobs(self, context: Context, attempt: Callable[[], Any]) -> Any:
        """Run ``attempt``; while its job ends interrupted (spot), or stopped by an earlier try of
        the task (a clear's ``on_kill`` that landed after this try reattached), go on with the
        run's next job.

        ``submit_job`` creates that job (or refuses once the interruption budget is spent), so a
        crash in between is as safe as anywhere else.
        """
        from airflow_dist_training.checkpoints.resume import AttemptOutcome

        while True:
            try:
                return attempt()
            except TrainingJobError as exc:
                desc = self._description or {}
                outcome = _outcome(desc)
                if desc.get("TrainingJobName") != exc.job_name:
                    raise
                if self._stopped_by_an_earlier_try(desc):
                    self.log.warning(
                        "%s The stop was not this try's: an earlier try of the task asked for it when "
                        "it was cleared or killed, after this try had reattached. Going on with the "
                        "run's next job.",
                        exc,
                    )
                elif outcome is AttemptOutcome.INTERRUPTED and desc.get("EnableManagedSpotTraining"):
                    self.log.warning(  # only spot capacity is reclaimed
                        "%s Replacing it with the run's next job, which resumes from the latest complete "
                        "checkpoint (interruptions do not use up the task's retries).",
                        exc,
                    )
                else:
                    raise
                self._description = None
                attempt = partial(self.execute_resumable, context)

    def _execute_local(self, context: Context) -> Any:
        job = self._run_job(context)
        self._job_name = job.name
        self.log.info("Running %s locally (torchrun) as %s", job.spec.name, job.name)
        self._prepare_run_checkpoints()
        self._persist_local_links(context, job.name)
        backend: Any = self.training_backend
        result = backend.run(
            job.spec,
            job.name,
            log=self.log.info,
            run_identity=self._run_plan(context).identity_hash,
            request=job.request,
            uploads=job.uploads,
        )
        result = {**dict(result), "backend": self.backend}  # the executor's job, under this backend's name
        self._persist_local_links(context, self._job_name, result)
        return result

    def _local_openlineage(self) -> Any:
        """A local job's lineage: the channels' local sources in, the model artifact out."""
        from airflow_dist_training.lineage import local_training_datasets, operator_lineage

        base = self.local_hook_kwargs.get("base_dir")
        inputs, outputs = local_training_datasets(
            self._spec_obj, getattr(self, "_local_result", None), str(base) if base else None
        )
        return operator_lineage(inputs, outputs)

    def _persist_local_links(self, context: Context, name: str, result: dict[str, Any] | None = None) -> None:
        """Local jobs: links to the Training view and the job's local artifacts (and the job dir)."""
        self._local_result = result
        result = result or {}
        links.persist(
            context,
            region="local",
            job_name=name,
            output_uri=result.get("output_uri") or result.get("model_artifact_uri"),
            checkpoint_uri=result.get("checkpoint_uri"),
            backend=self.backend,
            job_dir=str(self.local_hook.job_dir(name)),
        )

    # ResumableJobMixin: submit_job is "ensure the run's job exists" (idempotent).
    def submit_job(self, context: Context) -> str:
        """Describe before create over the run's generations (``DurableJob.find_or_create``)."""
        plan = self._run_plan(context)
        ref = self.job_backend.find_or_create(
            (plan.job_name(generation) for generation in range(1, MAX_GENERATIONS + 1)),
            partial(self._launch_request, context),
            exhausted=lambda: AirflowException(f"{MAX_GENERATIONS} jobs of this run failed; not creating another"),
            on_ended=self._log_ended_job,
        )
        if ref.created:
            _fault_point("after_create")
        self._job_name = ref.name
        return ref.name

    def _log_ended_job(self, name: str, desc: dict[str, Any], next_generation: int) -> None:
        self.log.warning(
            "This run's earlier job %s ended %s%s (%s); starting generation %d.",
            name,
            desc.get("TrainingJobStatus"),
            f" ({desc.get('FailureReason')})" if desc.get("FailureReason") else "",
            _outcome(desc).value,
            next_generation,
        )

    def _launch_request(self, context: Context, name: str, ended: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The request of the run's next job ``name`` (after its ``ended`` ones); its uploads are put first."""
        on_demand = self._next_job_on_demand(context, [_outcome(desc) for desc in ended])
        if self._launch is None or self._launch.name != name or on_demand:
            self._launch = self._run_job(context, len(ended) + 1, on_demand=on_demand)
        launch = self._launch
        assert launch.name == name and launch.request is not None, (launch.name, name)
        self._fsx_preflight()
        self.job_backend.put_uploads(list(launch.uploads))
        self._prepare_run_checkpoints()
        self.log.info(
            "Creating training job %s:\n%s", name, json.dumps(launch.request, indent=2, default=str)
        )
        _fault_point("before_create")
        return launch.request

    def _stopped_by_an_earlier_try(self, desc: dict[str, Any]) -> bool:
        """A job Airflow stopped (``stop-requested``) though this try, still running, did not: the
        ``on_kill`` of the try that a clear replaced landed after this try reattached to the job."""
        return (
            desc.get("TrainingJobStatus") == "Stopped"
            and not self._stopped_here
            and self.job_backend.stop_requested(desc)
        )

    def _next_job_on_demand(self, context: Context, outcomes: list[AttemptOutcome]) -> bool:
        """Apply the spot budget to the run's earlier jobs: refuse, or say whether to leave spot.

        Real failures are bounded by the task's ``retries``, not here.
        """
        from airflow_dist_training.checkpoints.resume import FailureBudget, decide_retry

        if not outcomes:
            return False
        if self._spec_obj is None:
            self._run_job(context)  # the run's spec (a task resumed after its trigger)
        assert self._spec_obj is not None
        spot = self._spec_obj.spot
        if not spot.enabled:
            return False
        budget = FailureBudget(
            max_failures=MAX_GENERATIONS,
            max_interruptions=spot.max_interruptions,
            on_demand_after=spot.on_demand_after_interruptions,
        )
        decision = decide_retry(outcomes, budget, spot=True)
        if not decision.retry:
            raise AirflowFailException(
                f"Not creating another training job for this run: {decision.reason} "
                "(spot.max_interruptions). Raise the budget, or set spot.on_demand_after_interruptions."
            )
        if not decision.use_spot:
            self.log.warning(
                "%d spot interruptions in this run (spot.on_demand_after_interruptions=%d): "
                "the next job runs on on-demand instances.",
                decision.interruptions,
                spot.on_demand_after_interruptions,
            )
        return not decision.use_spot

    def _fsx_preflight(self) -> None:
        """What the backend checks of the job's inputs before any job (FSx channels on SageMaker)."""
        if self._spec_obj is not None:
            self.job_backend.preflight(self._spec_obj, log=self.log.warning)

    def get_job_status(self, external_id: Any, context: Context) -> str:
        desc = self.job_backend.describe_or_none(str(external_id))
        return str(desc.get("TrainingJobStatus")) if desc else "Unknown"

    def is_job_active(self, status: str) -> bool:
        return status in ACTIVE_STATES

    def is_job_succeeded(self, status: str) -> bool:
        return status in SUCCESS_STATES

    def poll_until_complete(self, external_id: Any, context: Context) -> Any:
        """Wait for the job (sync or deferred); returns its result (also on the reconnect path)."""
        name = str(external_id)
        self._job_name = name
        _fault_point("after_persist")
        desc = self.job_backend.describe(name)
        self._persist_links(context, desc)
        if desc.get("TrainingJobStatus") not in TERMINAL_STATES:
            if self.deferrable:
                deadline, reason = self._deferred_deadline(context)
                self.defer(
                    trigger=self.job_backend.trigger(
                        name,
                        poll_interval=self.poll_interval,
                        max_wait_seconds=self.max_wait_seconds,
                        stream_logs=self.stream_logs,
                        deadline=deadline,
                        deadline_reason=reason,
                    ),
                    method_name="execute_complete",
                )
            _fault_point("wait")
            try:
                desc = self.job_backend.wait(
                    name,
                    poll_interval=self.poll_interval,
                    max_wait_seconds=self.max_wait_seconds,
                    log=self.log.info,
                    stream_logs=self.stream_logs,
                )
            except TimeoutError as exc:
                self._on_timeout(name, str(exc))
        return self._finish(desc)

    def _deferred_deadline(self, context: Context) -> tuple[float | None, str | None]:
        """When the deferred wait must end: ``max_wait_seconds`` or the task's ``execution_timeout``.

        Airflow 3.3 does not apply ``execution_timeout`` while a task is deferred (and a trigger
        timeout would fail the task without ``on_kill``). The trigger applies it, so a task that
        times out stops its job (``stop_on_timeout``) like in sync mode.
        """
        now = time.time()
        limits: list[tuple[float, str]] = []
        if self.max_wait_seconds is not None:
            limits.append((now + self.max_wait_seconds, f"max_wait_seconds={self.max_wait_seconds:g}"))
        if self.execution_timeout is not None:
            started = getattr(context.get("ti"), "start_date", None)
            began = started.timestamp() if started is not None else now
            seconds = self.execution_timeout.total_seconds()
            limits.append((began + seconds, f"execution_timeout={seconds:g}s"))
        return min(limits) if limits else (None, None)

    def get_job_result(self, external_id: Any, context: Context) -> Any:
        desc = self._description
        if desc is None or desc.get("TrainingJobName") != external_id:
            desc = self.job_backend.describe(str(external_id))
            # a retry that found the job already completed: XComs of earlier tries are gone
            self._persist_links(context, desc)
        return self._finish(desc)

    def _persist_links(self, context: Context, desc: dict[str, Any]) -> None:
        links.persist(context, **self.job_backend.links(desc))

    def _finish(self, desc: dict[str, Any]) -> dict[str, Any]:
        self._description = desc
        result = dict(self.job_backend.result_of(desc))
        self.log.info(
            "Training job %s completed: billable %ss, metrics %s, model %s",
            result["job_name"],
            result["billable_seconds"],
            result["final_metrics"],
            result["model_artifact_uri"],
        )
        return result

    def _on_timeout(self, name: str, message: str) -> None:
        if self.stop_on_timeout:
            self.job_backend.stop(name, reason="max_wait_seconds exceeded")
            message += "; the job was stopped (stop_on_timeout=True)"
        raise AirflowException(message)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resume after the trigger: uses only the event (another worker may resume the task).

        Without a usable event (a try the scheduler failed while it deferred resumes here with none)
        the task reattaches as a retry does: to the run's job, found by its deterministic name.
        """
        if not event or "job_name" not in event:
            self.log.warning("Resumed without a trigger event (%r): reattaching to this run's job.", event)
            return self.execute(context)
        name = str(event["job_name"])
        self._job_name = name
        status = event.get("status")
        if status == "timeout":
            self._on_timeout(name, str(event.get("message")))
        if status == "error":
            raise AirflowException(str(event.get("message")))
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        with failing_fast_without_retry_policy():
            return self._replacing_interrupted_jobs(
                context, lambda: self._finish(self.job_backend.describe(name))
            )

    def on_kill(self) -> None:
        name = self._job_name
        if not name:
            return
        self._stopped_here = True
        if not self.training_backend.record.durable:
            self.training_backend.stop(name, reason="task killed")
            return
        try:
            self.job_backend.stop(name, reason="task killed")
        except Exception as exc:  # on_kill must not raise
            self.log.error("Could not stop training job %s: %s", name, exc)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Inputs: S3, FSx and EFS channels; output: the model artifact. None if OpenLineage is absent."""
        try:
            from airflow.providers.common.compat.openlineage.facet import Dataset
            from airflow.providers.openlineage.extractors import OperatorLineage
        except ImportError:
            return None
        if not self.training_backend.record.durable:
            return self._local_openlineage()
        desc = self._description or {}
        request = (self._launch.request if self._launch is not None else None) or desc
        inputs, outputs = lineage_datasets(request, desc)
        return OperatorLineage(
            inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
            outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
        )


class StopOrphanedTrainingJobsOperator(AwsConnectionMixin, BaseOperator):
    """Teardown: stop the SageMaker jobs that a training task of this DAG run left running.

    ``on_kill`` cannot cover every case. Airflow runs none when the worker running the task dies
    (OOM kill, node loss), or when a deferred task is marked or cleared before the triggerer has
    started its trigger. Put this operator after the training task as a teardown; it does not
    change the DAG run's state::

        train >> StopOrphanedTrainingJobsOperator(
            task_id="stop_orphaned_jobs", training_task_id="train"
        ).as_teardown()

    It lists the run's InProgress jobs (``ListTrainingJobs`` by the run hash in their names) and
    stops them. Returns the names it stopped. ``stage_train_evaluate`` adds the same teardown.

    :param training_task_id: the ``DistributedTrainingOperator`` task of this DAG (templated).
    :param map_index: the training task's map index, for a mapped training task.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region (default: the connection's).
    """

    template_fields: Sequence[str] = ("training_task_id", "aws_conn_id", "region_name")
    ui_color = "#f3e5d8"

    def __init__(
        self,
        *,
        training_task_id: str,
        map_index: int = -1,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.training_task_id = training_task_id
        self.map_index = map_index
        self._set_aws_connection(aws_conn_id, region_name)

    job_backend = cached_property(sagemaker_backend)

    def execute(self, context: Context) -> list[str]:
        dag_id = self.dag_id if self.has_dag() else "no-dag"
        run_hash = run_identity_hash(
            identity_from_context(context, self.training_task_id, dag_id=dag_id, map_index=self.map_index)
        )
        return self.stop_run(self.job_backend, run_hash, self.training_task_id, self.log)

    @staticmethod
    def stop_run(jobs: Any, run_hash: str, training_task_id: str, log: Any) -> list[str]:
        """Stop the run's InProgress jobs (their names carry ``run_hash``); returns their names.

        Shared with ``stage_train_evaluate``'s ``stop_orphaned_job`` teardown, which knows the run
        hash from the planned job name.
        """
        stopped = jobs.stop_run_jobs(run_hash, reason="the training task ended while its job was running")
        if stopped:
            log.warning("Stopped training jobs left running by %s: %s", training_task_id, stopped)
        else:
            log.info("No training job of %s is left running.", training_task_id)
        return stopped


def lineage_datasets(
    request: Mapping[str, Any], description: Mapping[str, Any]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(namespace, name) pairs of a job's inputs and outputs, OpenLineage naming.

    S3: ``s3://<bucket>`` + key. FSx for Lustre / EFS: ``fsx://<file system id>`` /
    ``efs://<file system id>`` + directory path. The code channel is not a data input.
    """
    inputs: list[tuple[str, str]] = []
    for channel in request.get("InputDataConfig") or description.get("InputDataConfig") or []:
        if channel.get("ChannelName") == "code":
            continue
        source = channel.get("DataSource") or {}
        if "S3DataSource" in source:
            _, bucket, key = split_uri(str(source["S3DataSource"]["S3Uri"]))
            inputs.append((f"s3://{bucket}", key or "/"))
        elif "FileSystemDataSource" in source:
            fs = source["FileSystemDataSource"]
            scheme = "fsx" if fs.get("FileSystemType") == "FSxLustre" else "efs"
            inputs.append((f"{scheme}://{fs.get('FileSystemId')}", str(fs.get("DirectoryPath", "/"))))
    outputs: list[tuple[str, str]] = []
    artifact = (description.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    if artifact and str(artifact).startswith("s3://"):
        _, bucket, key = split_uri(str(artifact))
        outputs.append((f"s3://{bucket}", key))
    return inputs, outputs
