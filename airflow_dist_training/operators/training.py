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
from collections.abc import Mapping, Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.compat import (
    AirflowException,
    BaseOperator,
    ResumableJobMixin,
)
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.job_states import ACTIVE_PHASES, AttemptOutcome, JobPhase, JobStatus
from airflow_dist_training.lineage import lineage_datasets as lineage_datasets  # its public home of old
from airflow_dist_training.lineage import training_lineage
from airflow_dist_training.links import sagemaker as links
from airflow_dist_training.operators import default_deferrable
from airflow_dist_training.operators.checkpoints import RESUMED_FROM_XCOM_KEY as RESUMED_FROM_XCOM_KEY
from airflow_dist_training.operators.checkpoints import RunCheckpointsMixin
from airflow_dist_training.operators.generations import RunGenerationsMixin
from airflow_dist_training.operators.orphaned_jobs import (
    StopOrphanedTrainingJobsOperator as StopOrphanedTrainingJobsOperator,
)  # its public home of old
from airflow_dist_training.operators.runs import RunPlanMixin
from airflow_dist_training.operators.runs import (
    mask_spec_secrets as mask_spec_secrets,
)  # its public home of old
from airflow_dist_training.spec.training import MAX_RUN_JOBS as MAX_GENERATIONS

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.planning import RunJob, RunPlan
    from airflow_dist_training.spec.training import TrainingJobSpec

#: Labels the job's last log lines that the trigger's terminal event carries, in the task log.
JOB_LAST_LINE = "job log, last line:"


def _fault_point(name: str) -> None:
    from airflow_dist_training.hooks.training import _fault_point as fp

    fp(name)


class DistributedTrainingOperator(
    AwsConnectionMixin,
    ResumableJobMixin,
    RunPlanMixin,
    RunGenerationsMixin,
    RunCheckpointsMixin,
    BaseOperator,
):
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
        self._try: Any = None  # this try's task instance: on_kill reads its state
        self._plan: RunPlan | None = None  # the run's plan (its spec as JSON, for XCom)
        self._launch: RunJob | None = None  # the run's current job, with its spec: the one the operator reads
        self._status: JobStatus | None = None  # the run's current job, as its backend last reported it
        self._result: dict[str, Any] | None = None  # its result, once it completed
        self._stopped_here = False  # this try asked for the stop (on_kill)
        self._resumed_from: dict[str, Any] | None = None  # where the job this try launched resumes

    @cached_property
    def hook(self) -> Any:
        """The backend's hook (``SageMakerTrainingHook`` on SageMaker)."""
        return self.training_backend.hook  # type: ignore[attr-defined]

    def execute(self, context: Context) -> Any:
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        self._try = context.get("ti")
        with failing_fast_without_retry_policy():
            # The first generation's request now: a spec the planner rejects fails before any AWS call.
            self._launch = self._run_job(context)
            return self._replacing_interrupted_jobs(context, partial(self._attempt, context))

    def _attempt(self, context: Context) -> Any:
        """Find or create the run's job, wait for it, return its result: through Airflow's
        ``task_state_store`` when the job outlives the worker; a job that ends with its task has
        nothing to reconnect to."""
        if self.training_backend.record.durable:
            return self.execute_resumable(context)
        return self.poll_until_complete(self.submit_job(context), context)

    # ResumableJobMixin: submit_job is "ensure the run's job exists" (idempotent).
    def submit_job(self, context: Context) -> str:
        """Describe before create over the run's generations (``DurableJob.find_or_create``)."""
        plan = self._run_plan(context)
        ref = self.training_backend.find_or_create(
            (plan.job_name(generation) for generation in range(1, MAX_GENERATIONS + 1)),
            partial(self._launch_request, context),
            exhausted=lambda: AirflowException(
                f"{MAX_GENERATIONS} jobs of this run failed; not creating another"
            ),
            on_ended=self._log_ended_job,
        )
        if ref.created:
            _fault_point("after_create")
        self._job_name = ref.name
        return ref.name

    def _relaunched_by_a_retry(self, context: Context) -> bool:
        """A job that is not durable ends with its try: a later try of the task relaunches the run
        (a durable backend's earlier jobs are in ``ended`` instead)."""
        retry = int(getattr(context.get("ti"), "try_number", 1) or 1) > 1
        return retry and not self.training_backend.record.durable

    def _launch_request(self, context: Context, name: str, ended: Sequence[JobStatus]) -> RunJob:
        """The run's next job ``name`` (after its ``ended`` ones), its checkpoints prepared."""
        on_demand = self._next_job_on_demand(context, [job.outcome or AttemptOutcome.FAILED for job in ended])
        if self._launch is None or self._launch.name != name or on_demand:
            self._launch = self._run_job(context, len(ended) + 1, on_demand=on_demand)
        launch = self._launch
        assert launch.name == name, (launch.name, name)
        self._fsx_preflight()
        from airflow_dist_training.checkpoints.resume import resume_cause

        self._prepare_run_checkpoints(
            context,
            launch,
            resume_cause(ended[-1]) if ended else "an earlier try of the task",
            relaunch=bool(ended) or self._relaunched_by_a_retry(context),
        )
        if launch.request is None:  # the backend plans it from the spec (a local job's stand-ins)
            self.log.info("Starting training job %s (%s) on %s", name, launch.spec.name, self.backend)
        else:
            self.log.info(
                "Creating training job %s:\n%s", name, json.dumps(launch.request, indent=2, default=str)
            )
        _fault_point("before_create")
        return launch

    def _fsx_preflight(self) -> None:
        """What the backend checks of the job's inputs before any job (FSx channels on SageMaker)."""
        if self._launch is not None:
            self.training_backend.preflight(self._launch.spec, log=self.log.warning)

    def get_job_status(self, external_id: Any, context: Context) -> str:
        status = self.training_backend.status(str(external_id))
        return status.phase.value if status else "unknown"

    def is_job_active(self, status: str) -> bool:
        return status in ACTIVE_PHASES

    def is_job_succeeded(self, status: str) -> bool:
        return status == JobPhase.COMPLETED

    def _job_status(self, name: str) -> JobStatus:
        status = self.training_backend.status(name)
        if status is None:
            raise AirflowException(f"Training job {name} does not exist")
        return status

    def poll_until_complete(self, external_id: Any, context: Context) -> Any:
        """Wait for the job (sync or deferred); returns its result (also on the reconnect path)."""
        name = str(external_id)
        self._job_name = name
        _fault_point("after_persist")
        status = self._job_status(name)
        self._persist_links(context, status)
        if status.active:
            from airflow_dist_training.triggers.base import wait_deadline

            started = getattr(context.get("ti"), "start_date", None)
            deadline, reason = wait_deadline(self.max_wait_seconds, self.execution_timeout, started)
            trigger = self.deferrable and self.training_backend.trigger(
                name,
                poll_interval=self.poll_interval,
                max_wait_seconds=self.max_wait_seconds,
                stream_logs=self.stream_logs,
                deadline=deadline,
                deadline_reason=reason,
            )
            if trigger:  # None: the job lives in this process
                self.defer(trigger=trigger, method_name="execute_complete")
            _fault_point("wait")
            try:
                status = self.training_backend.wait(
                    name,
                    poll_interval=self.poll_interval,
                    max_wait_seconds=self.max_wait_seconds,
                    log=self.log.info,
                    stream_logs=self.stream_logs,
                )
            except TimeoutError as exc:
                self._on_timeout(name, str(exc))
        return self._finish(status, context)

    def get_job_result(self, external_id: Any, context: Context) -> Any:
        status = self._status
        if status is None or status.name != external_id:
            status = self._job_status(str(external_id))
        return self._finish(status, context)

    def _persist_links(self, context: Context, status: JobStatus) -> None:
        links.persist(context, **self.training_backend.links(status))

    def _finish(self, status: JobStatus, context: Context) -> dict[str, Any]:
        self._status = status
        result = dict(self.training_backend.result_of(status))
        # a retry that found the job completed (XComs of earlier tries are gone), and a job's outputs
        self._persist_links(context, status)
        result["backend"] = self.backend  # the registered name of the backend that ran it
        result["resumed_from"] = self._resumed_from_for(context, str(result["job_name"]))
        self._result = result
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
            self.training_backend.stop(name, reason="max_wait_seconds exceeded")
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
        self._try = context.get("ti")
        status = event.get("status")
        if status == "timeout":
            self._on_timeout(name, str(event.get("message")))
        if status == "error":
            raise AirflowException(str(event.get("message")))
        for line in event.get("last_lines") or ():  # a triggerer may drop a trigger's last lines
            self.log.info("%s %s", JOB_LAST_LINE, line)
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        with failing_fast_without_retry_policy():
            return self._replacing_interrupted_jobs(
                context, lambda: self._finish(self._job_status(name), context)
            )

    def on_kill(self) -> None:
        """Stop the job only if the task will not come back for it (``task_kills.stop_on_worker_kill``):
        a try failed by the scheduler for a missed heartbeat, with retries left, keeps its job, and
        the next try reattaches. A local job lives in this process and always stops."""
        name = self._job_name
        if not name:
            return
        from airflow_dist_training.task_kills import stop_on_worker_kill

        if self.training_backend.record.durable:
            stop_on_worker_kill(self._try, name, partial(self._stop_here, name), self.log, what="training job")
        else:
            self._stop_here(name)

    def _stop_here(self, name: str) -> None:
        self._stopped_here = True  # the job ending stopped is then this try's doing, not an earlier try's
        self.training_backend.stop(name, reason="task killed")

    get_openlineage_facets_on_complete = training_lineage  # channels in, model artifact out
