"""``DistributedTuningOperator``: a hyperparameter tuning job over a training spec, durable (``docs/tuning.md``).

As the training operator: planned before any AWS call, a deterministic name described before it is
created (a retry reattaches), and the best training job as a ``TrainingResult`` plus ``tuning``, so
evaluation, gate and registry take it unchanged. The constructor does no I/O and parses nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.compat import AirflowException, BaseOperator
from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.operators import default_deferrable
from airflow_dist_training.operators.runs import SpecBackendMixin, beside_dag

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.hooks.local_training import LocalTrainingHook
    from airflow_dist_training.hooks.sagemaker_jobs import DurableJob
    from airflow_dist_training.hooks.training import SageMakerTrainingHook
    from airflow_dist_training.local.tuning import LocalTuningJob
    from airflow_dist_training.sagemaker.tuning import TuningPlan
    from airflow_dist_training.spec.training import TrainingJobSpec
    from airflow_dist_training.spec.tuning import TuningSpec

MAX_GENERATIONS = 10  # tuning jobs of one run (after Failed/Stopped ones)


def _exhausted(names: Sequence[str]) -> AirflowException:
    return AirflowException(
        f"every tuning job of this run ended Failed or Stopped ({', '.join(names)}); not starting another"
    )


class DistributedTuningOperator(AwsConnectionMixin, SpecBackendMixin, BaseOperator):
    """Run a hyperparameter tuning job from a training spec and a tuning section (on SageMaker or locally).

    :param spec: the training spec: a ``TrainingJobSpec``, a dict, or a YAML path/text (templated).
        Its ``metric_definitions`` must include the objective metric.
    :param tuning: the tuning section: a ``TuningSpec``, a dict or YAML text (templated):
        ranges, strategy, objective, ``max_jobs``, ``max_parallel_jobs``, ``early_stopping``.
    :param backend: a registered backend (``spec/backends.py``). One whose jobs run on AWS and
        outlive the worker (``sagemaker``) runs a SageMaker tuning job; one that runs jobs on this
        machine through the local executor (``local``) runs the tuning job's training jobs in the
        task (``local/tuning.py``).
    :param aws_conn_id: Airflow AWS connection (``None``: boto3's default chain).
    :param region_name: AWS region (default: the connection's).
    :param deferrable: wait in the triggerer; default ``[operators] default_deferrable`` (SageMaker).
    :param poll_interval: seconds between status checks.
    :param local_hook_kwargs: keyword arguments of ``LocalTrainingHook`` (local backend).
    :param local_parallel_jobs: local backend: training jobs at once (default: ``max_parallel_jobs``,
        lowered to what this machine's cores fit); never more than ``max_parallel_jobs``.
    :param max_wait_seconds: the only limit on the wait (``None``: as long as the tuning job runs);
        when exceeded the tuning job is stopped and the task fails.
    """

    template_fields: Sequence[str] = ("spec", "tuning", "aws_conn_id", "region_name")
    template_fields_renderers = {"spec": "json", "tuning": "json"}
    ui_color = "#efe3f7"

    def __init__(
        self,
        *,
        spec: TrainingJobSpec | Mapping[str, Any] | str | Path,
        tuning: TuningSpec | Mapping[str, Any] | str,
        backend: str = "sagemaker",
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        deferrable: bool | None = None,
        poll_interval: float = 30,
        max_wait_seconds: float | None = None,
        local_hook_kwargs: dict[str, Any] | None = None,
        local_parallel_jobs: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._set_spec_backend(spec, backend, local_hook_kwargs)
        if local_parallel_jobs is not None and local_parallel_jobs < 1:
            raise ValueError(f"local_parallel_jobs must be at least 1, got {local_parallel_jobs}")
        self.tuning = tuning
        self.local_parallel_jobs = local_parallel_jobs
        self._set_aws_connection(aws_conn_id, region_name)
        self.deferrable = default_deferrable(deferrable)
        self.poll_interval = poll_interval
        self.max_wait_seconds = max_wait_seconds
        self._job_name: str | None = None
        self._try: Any = None  # this try's task instance: on_kill reads its state
        self._identity: str | None = None
        self._local: LocalTuningJob | None = None

    @cached_property
    def hook(self) -> SageMakerTrainingHook:
        from airflow_dist_training.hooks.training import SageMakerTrainingHook

        return SageMakerTrainingHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)

    @cached_property
    def executor_hook(self) -> LocalTrainingHook:
        """The local executor's hook: a tuning job run in the task runs its trials on it."""
        from airflow_dist_training.hooks.local_training import LocalTrainingHook

        return LocalTrainingHook(**{"aws_conn_id": self.aws_conn_id, **self.local_hook_kwargs})  # S3 as the task's connection reaches it

    def _runs_in_task(self) -> bool:
        """True: the tuning job runs in the task on the local executor; False: a SageMaker tuning job.
        Decided by the backend's record, never its name; a backend that can do neither is refused."""
        from airflow_dist_training.errors import SpecValidationError

        record = self.training_backend.record
        if record.durable and record.on_aws:
            return False
        if record.tunes_in_task:
            return True
        why = (
            f"{self.backend!r} cannot run tuning jobs: they run as SageMaker tuning jobs (a backend "
            "whose jobs run on AWS and outlive the worker) or on the local executor"
        )
        raise SpecValidationError([("backend", why)])

    @cached_property
    def jobs(self) -> DurableJob:
        from airflow_dist_training.hooks.sagemaker_jobs import DurableJob
        from airflow_dist_training.sagemaker.job_kinds import TUNING

        return DurableJob(self.hook, TUNING)

    def _load(self) -> tuple[TrainingJobSpec, TuningSpec]:
        from airflow_dist_training.spec.loading import load_spec
        from airflow_dist_training.spec.tuning import load_tuning_spec

        return load_spec(beside_dag(self, self.spec)), load_tuning_spec(beside_dag(self, self.tuning))

    def _names(self, context: Context, base: str) -> list[str]:
        from airflow_dist_training.sagemaker.naming import identity_from_context
        from airflow_dist_training.sagemaker.tuning import tuning_job_name

        dag_id = self.dag_id if self.has_dag() else "no-dag"
        identity = self._identity = identity_from_context(context, self.task_id, dag_id=dag_id)
        return [tuning_job_name(base, identity, g) for g in range(1, MAX_GENERATIONS + 1)]

    def _plan(self, spec: TrainingJobSpec, tuning: TuningSpec, name: str) -> TuningPlan:
        from airflow_dist_training.hooks.aws import task_region
        from airflow_dist_training.sagemaker.tuning import plan_tuning_job

        region = task_region(self.aws_conn_id, self.region_name, hook=self.hook)
        return plan_tuning_job(spec, tuning, job_name=name, region=region, run_identity=self._identity)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        self._try = context.get("ti")
        with failing_fast_without_retry_policy():
            spec, tuning = self._load()
            names = self._names(context, tuning.name or spec.name)
            if self._runs_in_task():
                return self._execute_local(spec, tuning, names)
            plan = self._plan(spec, tuning, names[0])  # every spec problem before any AWS call
            for warning in plan.warnings:
                self.log.warning("%s", warning)

        def request_for(name: str, _ended: tuple[dict[str, Any], ...]) -> Mapping[str, Any]:
            final = plan if name == plan.job_name else self._plan(spec, tuning, name)
            self.hook.put_uploads(final.uploads)
            return final.request

        ref = self.jobs.find_or_create(
            names,
            request_for,
            exhausted=partial(_exhausted, names),
            on_ended=lambda name, desc, generation: self._log_ended(
                name, desc.get("HyperParameterTuningJobStatus"), generation
            ),
        )
        self._job_name = ref.name
        limits = plan.request["HyperParameterTuningJobConfig"]["ResourceLimits"]
        self.log.info(
            "Tuning job %s: %s, objective %s %s, %s training jobs, %d at a time.",
            ref.name,
            tuning.strategy,
            tuning.objective.type,
            tuning.objective.metric,
            limits.get("MaxNumberOfTrainingJobs", tuning.total_jobs),
            tuning.max_parallel_jobs,
        )
        if self.deferrable and not (ref.description and self.jobs.kind.is_terminal(ref.description)):
            self.defer(
                trigger=self.jobs.trigger(
                    ref.name,
                    aws_conn_id=self.aws_conn_id,
                    region_name=self.region_name,
                    poll_interval=self.poll_interval,
                    deadline=time.time() + self.max_wait_seconds if self.max_wait_seconds else None,
                ),
                method_name="execute_complete",
            )
        return self._wait(ref.name)

    def _execute_local(self, spec: TrainingJobSpec, tuning: TuningSpec, names: list[str]) -> dict[str, Any]:
        """The run's tuning job on this machine: the first generation not ended Failed or Stopped."""
        from airflow_dist_training.errors import SpecValidationError
        from airflow_dist_training.local.tuning import LocalTuningJob
        from airflow_dist_training.sagemaker.tuning import tuning_plan_problems

        problems = tuning_plan_problems(spec, tuning, names[0])
        if problems:
            raise SpecValidationError(problems, source=spec.source_file)
        for generation, name in enumerate(names, start=1):
            job = LocalTuningJob(
                self.executor_hook,
                spec,
                tuning,
                name,
                run_identity=self._identity,
                parallel=self.local_parallel_jobs,
                log=self.log.info,
            )
            if job.status in ("Failed", "Stopped"):
                self._log_ended(name, job.status, generation + 1)
                continue
            self._local = job
            self._job_name = name
            if job.status == "Completed":
                self.log.info("This run's local tuning job %s completed earlier: not running it again.", name)
            desc = job.run(deadline=time.time() + self.max_wait_seconds if self.max_wait_seconds else None)
            if job.timed_out:  # as the SageMaker path's wait (retry.PollTimeout) says it
                raise AirflowException(
                    f"Local tuning job {name} still InProgress after {self.max_wait_seconds:g}s. "
                    "The tuning job was stopped."
                )
            return self._finish(desc)
        raise _exhausted(names)

    def _log_ended(self, name: str, status: Any, next_generation: int) -> None:
        self.log.warning("This run's tuning job %s ended %s: starting generation %d", name, status, next_generation)

    def _wait(self, name: str) -> dict[str, Any]:
        from airflow_dist_training.retry import PollTimeout
        from airflow_dist_training.triggers.tuning import tuning_progress

        last: list[str | None] = [None]

        def report(desc: dict[str, Any]) -> None:
            progress = tuning_progress(desc)
            if progress and progress != last[0]:
                last[0] = progress
                self.log.info("Tuning job %s: %s", name, progress)

        try:
            desc = self.jobs.wait(
                name, poll_interval=self.poll_interval, timeout=self.max_wait_seconds, on_poll=report
            )
        except PollTimeout as exc:
            self._stop(name, "max_wait_seconds exceeded")
            raise AirflowException(f"{exc}. The tuning job was stopped.") from None
        return self._finish(desc)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger: uses only the event (another worker may resume the task); without
        a usable one, reattach to the run's tuning job as a retry does."""
        if not event or "job_name" not in event:
            self.log.warning("Resumed without a trigger event (%r): reattaching to this run's tuning job.", event)
            return self.execute(context)
        name = str(event["job_name"])
        self._job_name = name
        self._try = context.get("ti")
        if event.get("status") == "timeout":
            self._stop(name, "max_wait_seconds exceeded")
            raise AirflowException(f"{event.get('message')} The tuning job was stopped.")
        if event.get("status") == "error":
            raise AirflowException(str(event.get("message")))
        return self._finish(self.jobs.describe(name))

    def _finish(self, desc: dict[str, Any]) -> dict[str, Any]:
        """The best training job as a ``TrainingResult`` plus ``tuning``; an error when the tuning job failed."""
        from airflow_dist_training.hooks.training import result_from_description
        from airflow_dist_training.sagemaker.tuning import best_training_job
        from airflow_dist_training.sagemaker.tuning_jobs import job_table

        name = str(desc["HyperParameterTuningJobName"])
        status = str(desc.get("HyperParameterTuningJobStatus"))
        best = best_training_job(desc)
        counters = dict(desc.get("TrainingJobStatusCounters") or {})
        if status != "Completed" or best is None:
            reason = desc.get("FailureReason") or (
                "no training job reported the objective metric" if status == "Completed" else None
            )
            on_request = desc["StopRequested"] if self._local is not None else self.jobs.stop_requested(desc)
            stopped = " (stopped on request)" if status == "Stopped" and on_request else ""
            raise TrainingJobError(
                f"Hyperparameter tuning job {name} ended {status}{stopped}"
                + (f": {reason}" if reason else "")
                + f". Training jobs: {counters}",
                job_name=name,
                status=status,
                failure_reason=str(reason) if reason else None,
            )
        if self._local is not None:  # the executor's job, under this backend's name
            result: dict[str, Any] = {
                **self._local.training_result(best["job_name"]),
                "backend": self.backend,
            }
        else:
            result = dict(result_from_description(self.hook.jobs.describe(best["job_name"])))
        result["tuning"] = {
            "job_name": name,
            "job_arn": desc.get("HyperParameterTuningJobArn"),
            "status": status,
            "strategy": (desc.get("HyperParameterTuningJobConfig") or {}).get("Strategy"),
            "objective_metric": best["objective_metric"],
            "objective_value": best["objective_value"],
            "tuned_hyperparameters": best["tuned_hyperparameters"],
            "training_job_counts": counters,
        }
        summaries = desc["TrainingJobSummaries"] if self._local is not None else self._training_jobs(name)
        result["tuning"]["training_jobs"] = job_table(summaries)
        self.log.info(
            "Tuning job %s: best training job %s, %s = %s, model %s",
            name,
            best["job_name"],
            best["objective_metric"],
            best["objective_value"],
            result.get("model_artifact_uri"),
        )
        return result

    def _training_jobs(self, name: str) -> list[dict[str, Any]]:
        return self.jobs.pages(
            "ListTrainingJobsForHyperParameterTuningJob",
            name,
            "TrainingJobSummaries",
            HyperParameterTuningJobName=name,
            SortBy="CreationTime",
            SortOrder="Ascending",
            MaxResults=100,
        )

    def _stop(self, name: str, reason: str) -> None:
        try:
            self.jobs.stop(name, reason=reason)
        except Exception as exc:  # stopping is best effort here: the task fails anyway
            self.log.error("Could not stop tuning job %s: %s", name, exc)

    def on_kill(self) -> None:
        """Stop the tuning job (SageMaker then stops its running training jobs; locally, this task's),
        unless the task comes back for it (``task_kills.stop_on_worker_kill``): its next try reattaches."""
        if self._local is not None:
            self._local.stop(self.executor_hook.stop_grace_seconds)
            return
        if not self._job_name:
            return
        from airflow_dist_training.task_kills import stop_on_worker_kill

        stop_on_worker_kill(
            self._try, self._job_name, partial(self._stop, self._job_name, "task killed"), self.log, what="tuning job"
        )
