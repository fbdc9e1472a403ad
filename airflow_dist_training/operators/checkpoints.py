"""Checkpoint operators: latest, retention, promotion. Declarative at parse time.

``__init__`` only stores arguments and checks pure rules (a retention rule that would delete
everything fails at DAG parse time); all I/O happens in ``execute`` through a cached
:class:`~airflow_dist_training.hooks.checkpoints.CheckpointHook`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.hooks.aws import AwsConnectionMixin
from airflow_dist_training.lineage import promotion_lineage

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.hooks.checkpoints import CheckpointHook
    from airflow_dist_training.job_states import JobStatus
    from airflow_dist_training.planning import RunJob, RunPlan, TrainingBackend
    from airflow_dist_training.results import ResumedFrom

RESUMED_FROM_XCOM_KEY = "resumed_from"  # where the job the training task launched resumed from


def checkpoint_store(
    operator: Any, *, layout: str | None = None, step_pattern: str | None = None
) -> CheckpointHook:
    """The checkpoint hook on the operator's connection (``s3://`` or a local path), for the
    layout given, else the operator's ``checkpoint_layout`` (default ``auto``)."""
    from airflow_dist_training.hooks.checkpoints import CheckpointHook

    return CheckpointHook(
        aws_conn_id=operator.aws_conn_id,
        region_name=operator.region_name,
        layout=str(layout or getattr(operator, "checkpoint_layout", "auto")),
        step_pattern=step_pattern or getattr(operator, "step_pattern", None),
    )


def check_layout(layout: str, step_pattern: str | None) -> None:
    """A layout or step pattern the registry does not know fails at DAG parse time (pure)."""
    from airflow_dist_training.checkpoints.layouts import layout_problem, step_pattern_problem

    problems = [("checkpoint_layout", p)] if (p := layout_problem(layout)) else []
    if step_pattern is not None and (p := step_pattern_problem(step_pattern)):
        problems.append(("step_pattern", p))
    if problems:
        raise SpecValidationError(problems)


class _CheckpointOperator(AwsConnectionMixin, BaseOperator):
    """Shared connection arguments and the cached hook.

    :param aws_conn_id: Airflow AWS connection for ``s3://`` locations.
    :param region_name: AWS region (default: the connection's).
    :param checkpoint_layout: the checkpoint layout (``auto``, ``manifest``, ``dcp``, ``hf-trainer``,
        ``single-file`` or a registered one; ``docs/checkpoints.md``).
    :param step_pattern: the ``single-file`` layout's file name, e.g. ``epoch={epoch}-step={step}.ckpt``.
    """

    template_fields: Sequence[str] = ("checkpoint_uri", "aws_conn_id", "region_name")

    def __init__(
        self,
        *,
        checkpoint_uri: str,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        checkpoint_layout: str = "auto",
        step_pattern: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_layout(checkpoint_layout, step_pattern)
        self.checkpoint_uri = checkpoint_uri
        self.checkpoint_layout = checkpoint_layout
        self.step_pattern = step_pattern
        self._set_aws_connection(aws_conn_id, region_name)

    hook = cached_property(checkpoint_store)


class LatestCheckpointOperator(_CheckpointOperator):
    """Push the newest complete checkpoint under ``checkpoint_uri`` to XCom.

    The XCom value is ``{"uri", "step", "epoch", "metrics", "world_size", "created_at",
    "manifest_modified", "num_files", "total_bytes", "complete"}``, or None when there is none.

    :param checkpoint_uri: checkpoint root (``s3://bucket/prefix/`` or a local path). Templated.
    :param fail_if_none: fail when there is no complete checkpoint (default: push None).
    """

    def __init__(self, *, checkpoint_uri: str, fail_if_none: bool = False, **kwargs: Any) -> None:
        super().__init__(checkpoint_uri=checkpoint_uri, **kwargs)
        self.fail_if_none = fail_if_none

    def execute(self, context: Context) -> dict[str, Any] | None:
        info = self.hook.latest_complete(self.checkpoint_uri)
        if info is None:
            if self.fail_if_none:
                raise SpecValidationError(
                    [("checkpoint_uri", f"no complete checkpoint under {self.checkpoint_uri}")]
                )
            self.log.info("No complete checkpoint under %s", self.checkpoint_uri)
            return None
        self.log.info("Latest complete checkpoint: step %s at %s", info.step, info.uri)
        return info.to_xcom()


class CheckpointRetentionOperator(_CheckpointOperator):
    """Keep the last N and the best K checkpoints by a metric; delete the rest (batched).

    Never deletes the newest complete checkpoint, the best one, a promoted one, or an incomplete one
    newer than the newest complete (it may still be uploading). Pushes the plan
    ``{"root", "kept": {step: [reasons]}, "deleted": [steps]}``.

    :param checkpoint_uri: checkpoint root. Templated.
    :param keep_last: newest complete checkpoints to keep.
    :param keep_best: best complete checkpoints by ``metric`` to keep.
    :param metric: manifest metric to rank by (needed when ``keep_best`` > 0).
    :param mode: ``"min"`` or ``"max"``.
    :param delete_incomplete: delete incomplete checkpoints older than the newest complete one.
    :param dry_run: only compute and push the plan.
    """

    def __init__(
        self,
        *,
        checkpoint_uri: str,
        keep_last: int = 1,
        keep_best: int = 0,
        metric: str | None = None,
        mode: str = "min",
        delete_incomplete: bool = True,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        from airflow_dist_training.checkpoints.retention import RetentionRule

        super().__init__(checkpoint_uri=checkpoint_uri, **kwargs)
        self.rule = RetentionRule(keep_last, keep_best, metric, mode, delete_incomplete)
        self.rule.validate(checkpoint_uri)  # pure: a rule that keeps nothing fails at parse time
        self.retention_dry_run = dry_run  # BaseOperator.dry_run is a method

    def execute(self, context: Context) -> dict[str, Any]:
        plan = self.hook.apply_retention(self.checkpoint_uri, self.rule, dry_run=self.retention_dry_run)
        verb = "Would delete" if self.retention_dry_run else "Deleted"
        self.log.info(
            "%s %d checkpoints under %s: %s", verb, len(plan.delete), self.checkpoint_uri, list(plan.delete)
        )
        return {**plan.to_xcom(), "dry_run": self.retention_dry_run}


class PromoteCheckpointOperator(_CheckpointOperator):
    """Copy the best, latest or a given checkpoint to a stable location and record it.

    The record goes to ``<checkpoint_uri>/_PROMOTED.json`` (``current`` + ``history``); retention never
    deletes a promoted checkpoint. Pushes the promotion entry (``step``, ``source_uri``,
    ``target_uri``, ``which``, ``metric``, ``metrics``, ``promoted_at``).

    :param checkpoint_uri: checkpoint root. Templated.
    :param target_uri: stable location to copy to (replaced on each promotion). Templated.
    :param which: ``"best"``, ``"latest"`` or a step number. Templated.
    :param metric: metric for ``which="best"``.
    :param mode: ``"min"`` or ``"max"`` for ``which="best"``.
    """

    template_fields: Sequence[str] = ("checkpoint_uri", "target_uri", "which", "aws_conn_id", "region_name")

    def __init__(
        self,
        *,
        checkpoint_uri: str,
        target_uri: str,
        which: str | int = "best",
        metric: str | None = None,
        mode: str = "min",
        **kwargs: Any,
    ) -> None:
        super().__init__(checkpoint_uri=checkpoint_uri, **kwargs)
        self.target_uri = target_uri
        self.which = which
        self.metric = metric
        self.mode = mode
        if not (isinstance(which, str) and "{{" in which):
            from airflow_dist_training.checkpoints.selection import Selector

            Selector.parse(which, metric, mode)  # pure check at parse time

    def execute(self, context: Context) -> dict[str, Any]:
        entry = self.hook.promote(
            self.checkpoint_uri, self.which, self.target_uri, metric=self.metric, mode=self.mode
        )
        self.log.info(
            "Promoted step %s from %s to %s", entry["step"], entry["source_uri"], entry["target_uri"]
        )
        self._lineage_result = entry
        return entry

    get_openlineage_facets_on_complete = promotion_lineage  # the checkpoint in, the promoted copy out


#: training task states after which it makes no job any more (up_for_retry will: keep watching)
_TRAINING_OVER = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


class CheckpointStallAlarmOperator(AwsConnectionMixin, BaseOperator):
    """Beside a training task, watch its running job's checkpoints; fail with the reason on a stall.

    It reads the run's plan (``plan_task_id``'s ``run_plan``), finds the run's current job by its
    planned names (described, never created: the training task alone creates jobs) and, while it
    runs, defers on :class:`~airflow_dist_training.triggers.checkpoints.CheckpointFreshnessTrigger`.
    A stall (no new complete checkpoint for ``max_age_seconds`` since the job started training)
    fails this task with the job, the age, the threshold and the checkpoint location, so its
    ``on_failure_callback`` and the DAG's fire; the job runs on unless ``on_stall="stop"``. The
    watch ends when the run's job ends and the training task is over (a job it replaces, e.g. after
    a spot interruption, is watched in turn). Before the job exists the task reschedules itself
    (every ``job_wait_seconds``).

    :param plan_task_id: the run's plan task (its XCom ``run_plan``).
    :param training_task_id: the training task creating the run's jobs.
    :param max_age_seconds: longest time without a new complete checkpoint.
    :param on_stall: ``alarm`` (fail this task; the job runs on) or ``stop`` (also stop the job;
        the training task then fails without retry).
    :param poll_interval: seconds between checks.
    :param job_wait_seconds: before the run's job exists, look again this much later (the task is
        rescheduled). Keep it >= 10 s under a scheduler: Airflow 3.3's fails a rescheduled task that
        already runs again when it processes its previous run's exit late (seen with 3 s under load).
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``;
        ``stage_train_evaluate`` defers unless told not to); ``False``: in the worker.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region (default: the connection's).
    :param checkpoint_layout: the layout the script writes (``auto`` detects it).
    :param step_pattern: the ``single-file`` layout's file name pattern.
    """

    template_fields: Sequence[str] = ("aws_conn_id", "region_name")
    ui_color = "#fce4d6"

    def __init__(
        self,
        *,
        plan_task_id: str,
        training_task_id: str,
        max_age_seconds: float,
        on_stall: str = "alarm",
        poll_interval: float = 30,
        job_wait_seconds: float = 30,
        deferrable: bool | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        checkpoint_layout: str = "auto",
        step_pattern: str | None = None,
        **kwargs: Any,
    ) -> None:
        from airflow_dist_training.operators import default_deferrable
        from airflow_dist_training.spec.loading import validate_model
        from airflow_dist_training.spec.pipeline import CheckpointFreshness

        super().__init__(**kwargs)
        check_layout(checkpoint_layout, step_pattern)
        # the spec's own rules and field paths, for a task built by hand too
        validate_model(CheckpointFreshness, {"max_age_seconds": max_age_seconds, "on_stall": on_stall})
        self.plan_task_id = plan_task_id
        self.training_task_id = training_task_id
        self.max_age_seconds = float(max_age_seconds)
        self.on_stall = on_stall
        self.poll_interval = poll_interval
        self.job_wait_seconds = job_wait_seconds
        self.deferrable = default_deferrable(deferrable)
        self.checkpoint_layout = checkpoint_layout
        self.step_pattern = step_pattern
        self._set_aws_connection(aws_conn_id, region_name)

    def _backend(self, context: Context) -> tuple[Any, Any]:
        """(the run's plan, its durable backend)."""
        from airflow_dist_training.hooks.backends import get_backend
        from airflow_dist_training.mapped_groups import pull_own
        from airflow_dist_training.planning import RUN_PLAN_XCOM_KEY, RunPlan

        data = pull_own(context["ti"], self.plan_task_id, RUN_PLAN_XCOM_KEY)
        if not data:
            from airflow_dist_training.compat import AirflowSkipException

            raise AirflowSkipException(f"{self.plan_task_id} planned no run: nothing to watch")
        plan = RunPlan.from_xcom(data)
        return plan, get_backend(plan.backend, aws_conn_id=self.aws_conn_id, region_name=self.region_name)

    @staticmethod
    def _current_job(plan: Any, backend: Any) -> JobStatus | None:
        """The status of the run's newest job (generations are created in order), or None."""
        from airflow_dist_training.spec.training import MAX_RUN_JOBS as MAX_GENERATIONS

        newest = None
        for generation in range(1, MAX_GENERATIONS + 1):
            status = backend.status(plan.job_name(generation))
            if status is None:
                break
            newest = status
        return newest

    def _training_over(self, context: Context) -> bool:
        from airflow_dist_training.mapped_groups import map_index_of

        ti = context["ti"]
        map_index = map_index_of(context)
        states = ti.get_task_states(
            dag_id=ti.dag_id,
            task_ids=[self.training_task_id],
            run_ids=[ti.run_id],
            map_index=map_index if map_index >= 0 else None,
        )
        key = self.training_task_id if map_index < 0 else f"{self.training_task_id}_{map_index}"
        state = (states.get(ti.run_id) or {}).get(key)
        return str(getattr(state, "value", state)) in _TRAINING_OVER

    def execute(self, context: Context) -> dict[str, Any] | None:
        import time
        from datetime import UTC, datetime, timedelta

        from airflow_dist_training.compat import AirflowRescheduleException
        plan, backend = self._backend(context)
        job = self._current_job(plan, backend)
        if job is None or not job.active:
            if self._training_over(context):
                what = f"{job.name} ended {job.state}" if job else "no job was created"
                self.log.info("%s is over and %s: the watch ends.", self.training_task_id, what)
                return {"job_name": job.name if job else None, "stalled": False}
            self.log.info("No running job of this run yet (%s creates it): looking again.", self.training_task_id)
            delay = timedelta(seconds=float(self.job_wait_seconds))
            raise AirflowRescheduleException(datetime.now(UTC) + delay)
        name = job.name
        checkpoint_uri = backend.links(job).get("checkpoint_uri") or plan.run_checkpoint_uri
        if not checkpoint_uri:
            self.log.warning("%s has no checkpoint location: nothing to watch.", name)
            return {"job_name": name, "stalled": False}
        from airflow_dist_training.triggers.checkpoints import CheckpointFreshnessTrigger

        trigger = CheckpointFreshnessTrigger(
            job_name=name,
            checkpoint_uri=str(checkpoint_uri),
            max_age_seconds=self.max_age_seconds,
            on_stall=self.on_stall,
            checkpoint_layout=self.checkpoint_layout,
            step_pattern=self.step_pattern,
            aws_conn_id=self.aws_conn_id,
            region_name=backend.region(),
            poll_interval=self.poll_interval,
        )
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        # in the worker: the trigger's own loop, run to its first event
        import asyncio

        async def first_event() -> Any:
            async for event in trigger.run():
                return event
            return None

        started = time.monotonic()
        event = asyncio.run(first_event())
        self.log.info("Watched %s for %.0fs.", name, time.monotonic() - started)
        return self.execute_complete(context, event.payload if event is not None else None)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """A stall fails the task (stopping the job first with ``on_stall="stop"``); a job that
        ended sends the task back to watch the run's next job, if the training task makes one."""
        from airflow_dist_training.compat import AirflowException, AirflowFailException

        status = (event or {}).get("status")
        if status == "error":
            raise AirflowException(str(event and event.get("message")))
        if status == "stalled":
            assert event is not None
            name = str(event["job_name"])
            message = str(event["message"])
            if self.on_stall == "stop":
                from airflow_dist_training.checkpoints.freshness import CHECKPOINT_STALL

                _, backend = self._backend(context)
                stopped = backend.stop(name, reason="checkpoint stall (on_stall: stop)", cause=CHECKPOINT_STALL)
                message += " Stop requested." if stopped else " It was no longer running."
            raise AirflowFailException(message)
        return self.execute(context)  # the job ended (or no event): the run's next one, or done


def _resumed_record(record: Any, job_name: str) -> ResumedFrom | None:
    """A ``resumed_from`` record's public part, if it is ``job_name``'s."""
    if not isinstance(record, Mapping) or record.get("job_name") != job_name:
        return None
    return {
        "step": int(record["step"]),
        "checkpoint_uri": str(record["checkpoint_uri"]),
        "after": str(record["after"]),
    }


class RunCheckpointsMixin:
    """The training operator's relaunch step: the checkpoints the run's next job restores,
    incomplete ones moved aside, and where each job resumed from (``resumed_from``)."""

    _plan: RunPlan | None
    _launch: RunJob | None
    _resumed_from: dict[str, Any] | None
    checkpoint_resume: str | None
    training_backend: TrainingBackend
    task_id: str
    log: Any

    def _prepare_run_checkpoints(self, context: Context, job: RunJob, after: str, *, relaunch: bool) -> None:
        """Before the run's next job starts: move the incomplete checkpoints where it restores them
        from aside, log where it resumes.

        Where it resumes (and ``after`` what) goes to XCom (``resumed_from``), so that the result of
        the job, read after a deferral by another worker maybe, says it (and the run's summary).

        With a resume policy, resume is scoped to the run: retries and spot replacements of this
        run find its own checkpoints (SageMaker restores ``run.run_uri`` into
        ``/opt/ml/checkpoints``). A new run never resumes another run's checkpoint (``latest`` once
        did, and a scheduled pipeline then trained zero epochs per run); initialising from earlier
        weights is the explicit ``warm_start`` channel instead (see ``docs/retraining.md``).

        Whatever the policy, a ``relaunch`` (a retry or a spot replacement: the run's previous job
        ended) restores the job's checkpoint location, where that job may have been killed mid-save:
        without a policy that is the spec's own location, shared by every run of the spec. A first
        job leaves a location that is not its run's alone as it is (another run may be writing there).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        from airflow_dist_training.checkpoints.resume import restored_checkpoint_uri
        from airflow_dist_training.errors import SpecValidationError
        from airflow_dist_training.hooks.checkpoints import ResumeScope, prepare_run_checkpoints

        plan = self._plan
        if plan is None or job.spec.checkpoint is None:
            return
        scope: ResumeScope = (
            "spec" if self.checkpoint_resume is None else "job" if self.checkpoint_resume == "none" else "run"
        )
        if scope != "run" and not relaunch:
            return
        where = restored_checkpoint_uri(job.spec, local=not plan.remote, base_dir=plan.base_dir)
        where = self.training_backend.checkpoint_location(job.spec, where)
        try:
            newest = prepare_run_checkpoints(self.checkpoint_hook, where, self.log, scope=scope)
        except (SpecValidationError, OSError, BotoCoreError, ClientError) as exc:
            if scope == "run":
                raise
            # without a policy Airflow never had to reach the job's checkpoints: the relaunch goes on
            self.log.warning(
                "Could not check the checkpoints under %s before relaunching the run (%s): the job "
                "restores them as they are, a partial one included",
                where,
                exc,
            )
            return
        if newest is None:
            return
        self._resumed_from = {
            "job_name": job.name,
            "step": newest.step,
            "checkpoint_uri": newest.uri,
            "after": after,
        }
        ti = context.get("ti")
        if ti is not None:
            ti.xcom_push(key=RESUMED_FROM_XCOM_KEY, value=self._resumed_from)

    def _resumed_from_for(self, context: Context, job_name: str) -> ResumedFrom | None:
        """Where ``job_name`` resumed from: as this try launched it, or as an earlier resume of the
        try (before a deferral) pushed it; None: from scratch, or launched by an earlier try."""
        found = _resumed_record(self._resumed_from, job_name)
        ti = context.get("ti")
        if found is None and ti is not None:
            from airflow_dist_training.mapped_groups import pull_own

            found = _resumed_record(pull_own(ti, self.task_id, RESUMED_FROM_XCOM_KEY), job_name)
        return found

    @cached_property
    def checkpoint_hook(self) -> Any:
        """The checkpoint hook on this task's connection, for the layout the run's spec names."""
        checkpoint = self._launch.spec.checkpoint if self._launch is not None else None
        return checkpoint_store(
            self,
            layout=checkpoint.layout if checkpoint else None,
            step_pattern=checkpoint.step_pattern if checkpoint else None,
        )

