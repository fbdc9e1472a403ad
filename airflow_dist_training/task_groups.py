"""Reusable task groups for Python DAG authors: ``stage_train_evaluate``.

One group runs a whole retraining step on one backend:

    plan -> stage -> train -> checkpoints (retention, promotion) -> evaluate -> gate -> register

The YAML DAG factory and the ready DAGs in ``dags/`` build on it, so there is one composition.
Everything here runs at DAG-parse time: it only constructs operators (no I/O, no AWS).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_dist_training.spec.backends import BackendRecord
    from airflow_dist_training.spec.members import Member, MemberList
    from airflow_dist_training.spec.pipeline import (
        CheckpointStep,
        DirectoryStaging,
        EvaluationStep,
        FSxStaging,
        RegistryStep,
        StagingStep,
        TypedRegistry,
        TypedStaging,
    )
    from airflow_dist_training.spec.training import TrainingJobSpec
    from airflow_dist_training.spec.tuning import TuningSpec

log = logging.getLogger(__name__)


def stage_train_evaluate(
    *,
    spec: TrainingJobSpec | Mapping[str, Any],
    backend: str = "local",
    group_id: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    dry_run: bool | str = False,
    staging: StagingStep | TypedStaging | None = None,
    checkpoints: CheckpointStep | None = None,
    evaluation: EvaluationStep | None = None,
    gate: Mapping[str, Any] | None = None,
    fail_on_reject: bool = False,
    registry: RegistryStep | TypedRegistry | None = None,
    aws_conn_id: str | None = "aws_default",
    region_name: str | None = None,
    base_dir: str | Path | None = None,
    training_kwargs: Mapping[str, Any] | None = None,
    force: bool = False,
    warm_start: str = "none",
    data_asset: Any = None,
    deferrable: bool | None = None,
    members: MemberList | Sequence[Member | Mapping[str, Any]] | None = None,
    tuning: TuningSpec | Mapping[str, Any] | None = None,
) -> Any:
    """Build the ``stage_train_evaluate`` task group and return it.

    :param spec: the training spec (object or dict; validated here, at parse time).
    :param backend: a registered backend (``local``, ``sagemaker``, ...); its capabilities shape the group.
    :param group_id: task group id (default ``stage_train_evaluate``).
    :param overrides: fixed run overrides (``RunOverrides`` fields); the run's params (a trigger
        form's ``instance_type``, ``epochs``, ...) are applied on top of them.
    :param dry_run: show the plan and launch nothing (the run's ``dry_run`` param also turns this on).
    :param staging: put a dataset in place first (FSx on SageMaker, a directory locally).
    :param checkpoints: resume policy, retention and promotion.
    :param evaluation: the evaluation script step (also re-evaluates the champion on a new evaluation set).
    :param gate: quality-gate thresholds (``{"thresholds": {...}}``, see ``GateSpec``).
    :param fail_on_reject: fail the run when the gate rejects (default: skip registration).
    :param registry: where to register an approved model.
    :param aws_conn_id: Airflow AWS connection.
    :param region_name: AWS region.
    :param base_dir: directory relative paths (scripts, local sources) resolve against.
    :param training_kwargs: extra ``DistributedTrainingOperator`` arguments.
    :param force: train even when nothing changed since the champion (the run's ``force`` param too).
    :param warm_start: ``none`` | ``champion`` | ``promoted`` (the run's ``warm_start`` param wins):
        initialise the model from the champion's weights or the last promoted checkpoint, handed
        to the script as the input channel ``warm_start``.
    :param data_asset: an ``Asset`` the staging step updates (its event's extra holds the staged
        data's fingerprint). Use a different asset than the one that schedules the DAG.
    :param deferrable: durable jobs wait in the triggerer (default; no worker slot held); ``False``: in the worker.
    :param members: one model per member (``spec/members.py``), a mapped task group (``mapped_groups.py``).
    :param tuning: train with a tuning job (``spec/tuning.py``); its best training job feeds the later steps.
    """
    from airflow_dist_training.retry import training_retry_policy
    from airflow_dist_training.spec.backends import backend_record
    from airflow_dist_training.spec.loading import load_spec
    from airflow_dist_training.spec.pipeline import CheckpointStep, resolve_steps

    spec_obj = load_spec(spec)
    record = backend_record(backend)  # its capabilities shape the group (no I/O here)
    staging, typed_registry = resolve_steps(record, staging, registry)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    checkpoints = checkpoints or CheckpointStep()
    # Bad input fails at once, capacity errors retry later (see airflow_dist_training.retry).
    group_defaults: Any = {"retry_policy": training_retry_policy()}
    with _task_group(group_id or "stage_train_evaluate", group_defaults, member_list := _members(spec_obj, members)) as group:
        g = _Group(spec_obj, record, base, f"{group.group_id}.", aws_conn_id, region_name, checkpoints.resume, deferrable, member_list, _local_registry_dir(typed_registry, base))
        plan_task = _plan_task(g, overrides, dry_run, evaluation, gate, typed_registry, staging)
        upstream, staged_channels = _staging_step(g, plan_task, staging, data_asset)
        check_task = _check_changes_task(g, staging, typed_registry, force, warm_start, checkpoints, evaluation, reevaluates := _can_reevaluate(evaluation, gate, typed_registry))
        train = _train_task(g, plan_task, check_task, checkpoints, staged_channels, training_kwargs, typed_registry, tuning, warm_start)
        upstream >> check_task  # check_changes >> train: its warm_start_uri XComArg makes that edge
        _stop_orphaned_teardown(g, plan_task, train)
        _checkpoint_tasks(g, plan_task, check_task, train, checkpoints)
        if evaluation is not None:
            evaluate = _evaluation_task(g, plan_task, train, evaluation)
            if gate is not None:
                _gate_and_register(g, train, evaluate, check_task, gate, typed_registry, fail_on_reject)
        _reevaluation_tasks(g, plan_task, check_task, evaluation, typed_registry, gate if reevaluates else None)
        _finish(g, group)
    return group


def _can_reevaluate(evaluation: EvaluationStep | None, gate: Mapping[str, Any] | None, registry: TypedRegistry | None) -> bool:
    """Re-evaluating the champion needs the evaluation step, and a gate's registry to record it in."""
    return evaluation is not None and gate is not None and registry is not None and registry.kind is not None


def _reevaluation_tasks(g: _Group, plan_task: Any, check_task: Any, evaluation: Any, registry: Any, gate: Mapping[str, Any] | None) -> None:
    """``check_changes -> reevaluate -> record_evaluation``, beside train (``reevaluation.py``):
    the group's own evaluation step, over the champion's model that ``check_changes`` names (``gate``:
    the group's, when it re-evaluates; its ``min``/``max`` still bind the champion on the new set)."""
    if gate is not None:
        from airflow_dist_training.mapped_groups import xcom_field
        from airflow_dist_training.reevaluation import record_evaluation_task

        model = xcom_field(f"{g.prefix}check_changes", "model_data_uri", key="reevaluate", optional=True)
        reevaluate = _evaluation_task(g, plan_task, check_task, evaluation, task_id="reevaluate", model_uri=model)
        thresholds = dict(gate.get("thresholds", {}))
        reevaluate >> record_evaluation_task(g, _group_name(registry, g.spec), registry.kind, thresholds)


def _task_group(group_id: str, default_args: Any, members: MemberList | None) -> Any:
    """A task group, or with members an Airflow mapped task group with one map index per member."""
    if members is None:
        from airflow.sdk import TaskGroup

        group = TaskGroup(group_id=group_id)
        # TaskGroup deep-copies its default_args (the retry policy's rules: a tenth of a millisecond
        # at every parse); ours are a fresh dict, so the group takes them as it would merge them.
        object.__setattr__(group, "default_args", {**group.default_args, **default_args})
        return group
    from airflow_dist_training.mapped_groups import member_task_group

    return member_task_group(group_id, default_args, members.names)


def _members(
    spec: TrainingJobSpec, members: MemberList | Sequence[Member | Mapping[str, Any]] | None
) -> MemberList | None:
    """The member list, each member's spec validated now (parse time): errors name ``for_each[i]``."""
    if members is None:
        return None
    from airflow_dist_training.spec.members import load_members, member_specs

    member_list = load_members(members)
    member_specs(spec, member_list)
    return member_list


@dataclass(frozen=True)
class _Group:
    """What every step of a ``stage_train_evaluate`` group is built from."""

    spec: TrainingJobSpec
    record: BackendRecord  # the backend's name and capabilities
    base: Path
    prefix: str  # "<group id>." : task ids of the group's tasks in XCom pulls
    aws_conn_id: str | None
    region_name: str | None
    checkpoint_resume: str | None  # the training task's policy: the plan task plans the same location
    deferrable: bool | None = None
    members: MemberList | None = None  # a mapped group: map index i trains members[i]
    registry_dir: str | None = None  # the local registry's folder, resolved once for all its tasks
    # each path resolved once: the change check and the evaluation both take the script and data
    resolved: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def spec_for(self, context: Mapping[str, Any]) -> TrainingJobSpec:
        """The spec the running task instance trains: its member's in a mapped group."""
        if self.members is None:
            return self.spec
        from airflow_dist_training.mapped_groups import map_index_of
        from airflow_dist_training.spec.members import member_spec

        index = map_index_of(context)
        return member_spec(self.spec, self.members.members[index], field=f"for_each[{index}]")

    def per_member(self, value: str, sep: str = "-") -> str:
        """``value`` as is, or in a mapped group a template rendering ``<value><sep><member>`` per member."""
        if self.members is None:
            return value
        from airflow_dist_training.mapped_groups import per_member

        return f"{value}{sep}{per_member(self.members.names)}"

    def member_value(self, context: Mapping[str, Any], value: str, sep: str = "-") -> str:
        """``value`` as is, or ``<value><sep><member>`` for the running task instance's member."""
        if self.members is None:
            return value
        from airflow_dist_training.mapped_groups import map_index_of

        return f"{value}{sep}{self.members.names[map_index_of(context)]}"

    @property
    def defer(self) -> bool:
        """Durable jobs wait in the triggerer unless the group says otherwise; others cannot."""
        return self.record.durable and self.deferrable is not False

    @property
    def backend(self) -> str:
        return self.record.name

    @property
    def aws(self) -> dict[str, Any]:
        """The connection arguments of every task that may call AWS."""
        return {"aws_conn_id": self.aws_conn_id, "region_name": self.region_name}

    def resolve(self, path: str) -> str:
        """A URI as is; a relative path against the group's base directory."""
        if "://" in path:
            return path
        if path not in self.resolved:  # = Path.resolve, cheaper
            self.resolved[path] = os.path.realpath(os.path.join(self.base, path))
        return self.resolved[path]

    @property
    def planned_image_expr(self) -> str:
        """A Jinja expression: the training image as planned for this run's region."""
        return (
            f"ti.xcom_pull(task_ids='{self.prefix}plan', key='request', map_indexes=ti.map_index)"
            "['AlgorithmSpecification']['TrainingImage']"
        )

    @property
    def planned_image(self) -> str:
        """The training image, as planned for this run's region (SageMaker evaluation and registry)."""
        return self.spec.image.uri or f"{{{{ {self.planned_image_expr} }}}}"


def _plan_task(
    g: _Group,
    overrides: Mapping[str, Any] | None,
    dry_run: bool | str,
    evaluation: EvaluationStep | None,
    gate: Mapping[str, Any] | None,
    registry: TypedRegistry | None,
    staging: TypedStaging | None,
) -> Any:
    """The ``plan`` short-circuit: a dry run stops there, nothing is launched."""
    from airflow.providers.standard.operators.python import ShortCircuitOperator

    def plan(**context: Any) -> bool:
        """Apply the run's overrides, validate and plan; show the request, cost bound and warnings.

        A dry run stops here: the launch steps are skipped, nothing is launched."""
        from airflow_dist_training.hooks.backends import plan_on_backend
        from airflow_dist_training.retry import failing_fast_without_retry_policy

        with failing_fast_without_retry_policy():
            params = dict(context.get("params") or {})
            spec = g.spec_for(context)
            plan = plan_on_backend(
                spec,
                backend=g.backend,
                overrides={**dict(overrides or {}), **params},
                train_task_id=f"{g.prefix}train",
                context=context,
                base_dir=str(g.base),
                checkpoint_resume=g.checkpoint_resume,
                **g.aws,
            )
            for line in plan.summary.splitlines():
                print(line)
            dry = _truthy(dry_run) or _truthy(params.get("dry_run", False))
            run_evaluation = _evaluation_for_run(evaluation, params, g.base)
            # every later step's inputs too: nothing is launched when one of them cannot work
            _check_run_steps(g, spec, run_evaluation, gate, registry, params, dry, staging)
            for key, value in plan.xcoms(dry_run=dry).items():
                context["ti"].xcom_push(key=key, value=value)
            if run_evaluation is not None:  # what the evaluation ships this run (the form may choose)
                deps = [g.resolve(d) for d in run_evaluation.dependencies]
                context["ti"].xcom_push(key="evaluation_dependencies", value=deps)
            return not dry

    # classic operators, not @task: the decorator costs about 0.5 ms per task at every DAG parse
    return ShortCircuitOperator(
        task_id="plan", python_callable=plan, ignore_downstream_trigger_rules=False, doc_md=plan.__doc__
    )


def _staging_step(
    g: _Group, plan_task: Any, staging: TypedStaging | None, data_asset: Any
) -> tuple[Any, dict[str, Any] | None]:
    """The staging task after the plan (if any): (the task to chain next, the channels it returns)."""
    if staging is None:
        return plan_task, None
    from airflow_dist_training.spec.pipeline import staging_record

    record = staging_record(staging.kind)
    stage = record.load_factory()(g, staging, data_asset)
    channels = {staging.channel: stage.output} if record.returns_channel else None
    plan_task >> stage
    return stage, channels


def _check_changes_task(
    g: _Group,
    staging: TypedStaging | None,
    registry: TypedRegistry | None,
    force: bool,
    warm_start: str,
    checkpoints: CheckpointStep,
    evaluation: EvaluationStep | None,
    reevaluates: bool = False,
) -> Any:
    """The branch before training: train (every task after it but ``reevaluate``), skip them all
    when nothing changed, or only ``reevaluate`` the champion when only the evaluation changed."""
    from airflow.providers.standard.operators.python import BranchPythonOperator

    from airflow_dist_training.retraining.warm_start import parse_warm_start
    from airflow_dist_training.spec.pipeline import staging_record

    warm_start = parse_warm_start(warm_start)

    registry_kind = registry.kind if registry is not None else None
    group = _group_name(registry, g.spec)
    promoted = None if checkpoints.promote_to is None else g.resolve(checkpoints.promote_to)
    staged_sources = None  # a channel the staging task returns holds the step's source
    if staging is not None and staging_record(staging.kind).returns_channel:
        staged_sources = {staging.channel: staging.source}

    judged_by = None  # what the evaluation reads: a new held-out set or script is a change too
    if evaluation is not None:
        data_uri = evaluation.channel_source
        judged_by = {
            "script": g.resolve(evaluation.script),
            "data_uri": g.resolve(data_uri) if data_uri else None,
            "arguments": dict(evaluation.arguments),
        }

    def check_changes(**context: Any) -> list[str]:
        """Fingerprint data, code, spec and evaluation; skip training when all equal the champion's
        (unless forced), re-evaluate the champion when only the evaluation changed."""
        from airflow_dist_training.mapped_groups import pull_own
        from airflow_dist_training.operators.retraining import check_changes as check

        run_evaluation = None
        if judged_by is not None:  # the dependencies this run ships (the trigger form may choose)
            shipped = pull_own(context["ti"], f"{g.prefix}plan", "evaluation_dependencies") or []
            run_evaluation = {**judged_by, "dependencies": list(shipped)}

        action = check(
            context,
            can_reevaluate=reevaluates,
            plan_task_id=f"{g.prefix}plan",
            backend=g.backend,
            base_dir=str(g.base),
            registry=registry_kind,
            group=g.member_value(context, group),  # a member's champion is its own group's
            local_registry_dir=g.registry_dir,
            force=force,
            warm_start=warm_start,
            promoted_uri=g.member_value(context, promoted, sep="/") if promoted else promoted,
            staged_sources=staged_sources,
            evaluation=run_evaluation,
            **g.aws,
        )
        reevaluate = f"{g.prefix}reevaluate"
        after = context["task"].downstream_task_ids
        if action == "reevaluate":
            return [reevaluate]
        return sorted(t for t in after if t != reevaluate) if action == "train" else []

    return BranchPythonOperator(task_id="check_changes", python_callable=check_changes, doc_md=check_changes.__doc__)


def _train_task(
    g: _Group,
    plan_task: Any,
    check_task: Any,
    checkpoints: CheckpointStep,
    staged_channels: dict[str, Any] | None,
    training_kwargs: Mapping[str, Any] | None,
    registry: TypedRegistry | None,
    tuning: TuningSpec | Mapping[str, Any] | None = None,
    warm_start: str = "none",
) -> Any:
    if tuning is not None:  # a tuning job in place of the training job: its own module
        from airflow_dist_training.tuning_step import tuning_train_task

        return tuning_train_task(
            g,
            plan_task,
            check_task,
            tuning,
            staged_channels=staged_channels,
            freshness=checkpoints.freshness,
            warm_start=warm_start,
            training_kwargs=training_kwargs,
            tracking=_tracking(g, plan_task, registry),
        )
    from airflow.sdk import XComArg

    from airflow_dist_training.operators.training import DistributedTrainingOperator

    return DistributedTrainingOperator(
        task_id="train",
        spec=XComArg(plan_task, key="spec"),  # type: ignore[arg-type]
        backend=g.backend,
        local_hook_kwargs={"base_dir": str(g.base)},
        checkpoint_resume=checkpoints.resume,
        plan_task_id=plan_task.task_id,  # the request sent is the plan task's
        channels=staged_channels,
        warm_start_uri=XComArg(check_task, key="warm_start_uri"),  # type: ignore[arg-type]
        **g.aws,
        **{"deferrable": g.defer, **_tracking(g, plan_task, registry), **dict(training_kwargs or {})},
    )


def _tracking(g: _Group, plan_task: Any, registry: TypedRegistry | None) -> dict[str, Any]:
    """The train task's ``post_execute`` when the registry kind tracks jobs (``RegistryRecord.tracker``)."""
    from airflow_dist_training.spec.registries import registry_record

    tracker = registry_record(registry.kind).tracker if registry is not None else None
    if tracker is None:
        return {}
    experiment, plan_task_id = _group_name(registry, g.spec), plan_task.task_id

    def track(context: Any, result: Any) -> None:
        from importlib import import_module

        module, _, attribute = str(tracker).partition(":")
        experiment_name = g.member_value(context, experiment)
        getattr(import_module(module), attribute)(context, result, plan_task_id=plan_task_id, experiment=experiment_name)

    return {"post_execute": track}


def _stop_orphaned_teardown(g: _Group, plan_task: Any, train: Any) -> None:
    """Stop this run's SageMaker jobs still running once the group is done: a teardown of the plan
    (skipped with it when the other backend's branch is taken). A backend whose jobs are not durable
    gets none: its processes die with their task, so the teardown could never stop anything."""
    if not g.record.durable:
        return
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import XComArg

    from airflow_dist_training.operators.orphaned_jobs import StopOrphanedTrainingJobsOperator

    def stop_run_jobs(run_hash: str | None, dry: Any = False) -> list[str]:
        """Stop this run's SageMaker jobs still running once the group is done (e.g. the worker
        running ``train`` died without ``on_kill``)."""
        if not run_hash or _truthy(dry):
            return []  # nothing was launched that could outlive its task
        from airflow_dist_training.hooks.backends import get_backend

        backend = get_backend(g.backend, **g.aws)
        return StopOrphanedTrainingJobsOperator.stop_run(backend, run_hash, train.task_id, log)

    stop_orphaned_job = PythonOperator(
        task_id="stop_orphaned_job",
        python_callable=stop_run_jobs,
        op_kwargs={"run_hash": XComArg(plan_task, key="run_hash"), "dry": XComArg(plan_task, key="dry_run")},
        doc_md=stop_run_jobs.__doc__,
    )
    stop_orphaned_job.as_teardown(setups=plan_task)
    train >> stop_orphaned_job


def _freshness_watch(g: _Group, plan_task: Any, check_task: Any, train: Any, checkpoints: CheckpointStep) -> None:
    """``watch_checkpoints`` beside ``train`` (same upstream, so skipped with it): alarms when the
    running job stops writing checkpoints (``checkpoints.freshness``). A backend whose job lives in
    its training task's process (not durable) has no job another task could watch: none there."""
    freshness = checkpoints.freshness
    if freshness is None:
        return
    if not g.record.durable:
        log.debug("checkpoints.freshness: the %s backend's job runs inside its training task; not watched.", g.backend)
        return
    from airflow_dist_training.operators.checkpoints import CheckpointStallAlarmOperator

    spec_checkpoint = g.spec.checkpoint
    watch = CheckpointStallAlarmOperator(
        task_id="watch_checkpoints",
        plan_task_id=plan_task.task_id,
        training_task_id=train.task_id,
        max_age_seconds=freshness.max_age_seconds,
        on_stall=freshness.on_stall,
        poll_interval=getattr(train, "poll_interval", 30),  # the training wait's pace (one poller for both)
        deferrable=g.defer,
        checkpoint_layout=spec_checkpoint.layout if spec_checkpoint else "auto",
        step_pattern=spec_checkpoint.step_pattern if spec_checkpoint else None,
        retries=0,  # a retry would alarm again for the same stall
        doc_md=CheckpointStallAlarmOperator.__doc__,
        **g.aws,
    )
    check_task >> watch


def _checkpoint_tasks(g: _Group, plan_task: Any, check_task: Any, train: Any, checkpoints: CheckpointStep) -> None:
    """The stall watch beside training (if configured), retention after it, then promotion of the
    best/latest checkpoint (if configured)."""
    _freshness_watch(g, plan_task, check_task, train, checkpoints)
    from airflow_dist_training.mapped_groups import xcom_field
    from airflow_dist_training.operators.checkpoints import (
        CheckpointRetentionOperator,
        PromoteCheckpointOperator,
    )

    checkpoint_uri = xcom_field(f"{g.prefix}train", "checkpoint_uri")
    spec_checkpoint = g.spec.checkpoint
    layout: dict[str, Any] = {  # the layout the training script writes (checkpoint.layout)
        "checkpoint_layout": spec_checkpoint.layout if spec_checkpoint else "auto",
        "step_pattern": spec_checkpoint.step_pattern if spec_checkpoint else None,
    }
    retention = CheckpointRetentionOperator(
        task_id="checkpoint_retention",
        checkpoint_uri=checkpoint_uri,
        keep_last=checkpoints.keep_last,
        keep_best=checkpoints.keep_best if checkpoints.metric else 0,
        metric=checkpoints.metric,
        mode=checkpoints.mode,
        **layout,
        **g.aws,
    )
    train >> retention
    if checkpoints.promote_to:
        promote = PromoteCheckpointOperator(
            task_id="promote_checkpoint",
            checkpoint_uri=checkpoint_uri,
            target_uri=g.per_member(g.resolve(checkpoints.promote_to), sep="/"),
            which="best" if checkpoints.metric else "latest",
            metric=checkpoints.metric,
            **layout,
            **g.aws,
        )
        retention >> promote


def _evaluation_task(
    g: _Group, plan_task: Any, train: Any, evaluation: EvaluationStep, task_id: str = "evaluate", model_uri: str | None = None
) -> Any:
    """The evaluation of the trained model (or, as ``reevaluate``, of ``model_uri``: the champion's)."""
    from airflow.sdk import XComArg

    from airflow_dist_training.mapped_groups import xcom_field
    from airflow_dist_training.operators.evaluation import EvaluationOperator
    from airflow_dist_training.spec.evaluations import evaluation_record

    data_uri = evaluation.channel_source
    job_kwargs: dict[str, Any] = {}
    if evaluation_record(g.record.evaluation).on_aws:
        output = g.spec.output.s3_path.rstrip("/") if g.spec.output else ""
        job_kwargs = {
            "image_uri": g.planned_image,
            "role_arn": g.spec.role_arn,
            "output_uri": g.per_member(f"{output}/evaluation/{{{{ run_id }}}}", sep="/"),
        }
    evaluate = EvaluationOperator(
        task_id=task_id,
        **job_kwargs,
        script=g.resolve(evaluation.script),
        model_uri=model_uri or xcom_field(f"{g.prefix}train", "model_artifact_uri"),
        data_uri=g.resolve(data_uri) if data_uri else data_uri,
        arguments=[str(a) for kv in evaluation.arguments.items() for a in (f"--{kv[0]}", kv[1])],
        dependencies=XComArg(plan_task, key="evaluation_dependencies"),  # type: ignore[arg-type]
        backend=g.backend,
        deferrable=g.defer,  # given: the operator's default reads Airflow's config at each parse
        **g.aws,
    )
    train >> evaluate
    return evaluate


def _gate_and_register(
    g: _Group,
    train: Any,
    evaluate: Any,
    check_task: Any,
    gate: Mapping[str, Any],
    registry: TypedRegistry | None,
    fail_on_reject: bool,
) -> None:
    from airflow.sdk import XComArg

    from airflow_dist_training.operators.evaluation import QualityGateOperator, RegisterModelOperator
    from airflow_dist_training.spec.registries import registry_record

    registry_kind = registry.kind if registry is not None else None
    group_name = g.per_member(_group_name(registry, g.spec))
    gate_task = QualityGateOperator(
        task_id="gate",
        evaluation=evaluate.output,
        thresholds=dict(gate.get("thresholds", {})),
        require_same_evaluation_set=bool(gate.get("require_same_evaluation_set", False)),
        registry=registry_kind,
        model_package_group_name=group_name,
        local_registry_dir=g.registry_dir,
        fail_on_reject=fail_on_reject,
        training=train.output,  # refuses a model that did not learn
        # a rejection skips registration only; the run's summary still runs
        ignore_downstream_trigger_rules=False,
        **g.aws,
    )  # downstream of evaluate through its evaluation XComArg (a second edge costs a DAG hash per end)
    if registry is None or registry_kind is None:
        return
    RegisterModelOperator(
        task_id="register",
        evaluation=evaluate.output,
        decision=gate_task.output,  # type: ignore[arg-type]
        training=train.output,  # type: ignore[arg-type]
        image_uri=_inference_image(g, registry)
        if registry_record(registry.kind).needs_image
        else (registry.inference_image or g.spec.image.uri),
        registry=registry_kind,
        model_package_group_name=group_name,
        local_registry_dir=g.registry_dir,
        auto_approve=registry.auto_approve,
        lineage=XComArg(check_task, key="lineage"),
        **g.aws,
    )  # downstream of the gate through its decision XComArg


def _finish(g: _Group, group: Any) -> None:
    """Once every task exists: the teardowns (stop orphaned jobs, delete a scratch file system) run
    after everything else; in a mapped group, short circuits skip per member."""
    teardowns = [t for t in group.children.values() if getattr(t, "is_teardown", False)]
    for leaf in list(group.get_leaves()) if teardowns else ():
        for teardown_task in teardowns:
            if leaf is not teardown_task and not getattr(leaf, "is_teardown", False):
                leaf >> teardown_task
    if g.members is not None:
        from airflow_dist_training.mapped_groups import skip_short_circuited_members

        skip_short_circuited_members(group)


def _inference_image(g: _Group, registry: TypedRegistry) -> str:
    """The registration's inference image: the run's ``inference_image`` param (trigger form), else
    ``registry.inference_image``, else the training image as planned for the run's region."""
    fixed = registry.inference_image or g.spec.image.uri
    fallback = repr(fixed) if fixed else g.planned_image_expr
    return f"{{{{ params.get('inference_image') or {fallback} }}}}"


def _evaluation_for_run(
    evaluation: EvaluationStep | None, params: Mapping[str, Any], base: Path
) -> EvaluationStep | None:
    """The evaluation step with the trigger form's ``evaluation_dependencies`` (files or folders
    of the project, relative to its folder), refused with the param's path when one is not."""
    chosen = params.get("evaluation_dependencies")
    if evaluation is None or chosen is None:
        return evaluation
    from pydantic import ValidationError

    from airflow_dist_training.errors import Problem, SpecValidationError

    field = "params.evaluation_dependencies"
    if not isinstance(chosen, list) or not all(isinstance(d, str) for d in chosen):
        raise SpecValidationError([Problem(field, "must be a list of paths")], source="trigger form")
    project = base.resolve()
    problems = [
        Problem(f"{field}[{i}]", f"{d!r} must be a path inside the project folder {project}")
        for i, d in enumerate(chosen)
        if Path(d).is_absolute() or "://" in d or not (project / d).resolve().is_relative_to(project)
    ]
    if problems:
        raise SpecValidationError(problems, source="trigger form")
    try:
        return type(evaluation).model_validate({**evaluation.model_dump(), "dependencies": chosen})
    except ValidationError as exc:
        message = "; ".join(str(e["msg"]) for e in exc.errors())
        raise SpecValidationError([Problem(field, message)], source="trigger form") from None


def _check_run_steps(
    g: _Group,
    spec: TrainingJobSpec,
    evaluation: EvaluationStep | None,
    gate: Mapping[str, Any] | None,
    registry: TypedRegistry | None,
    params: Mapping[str, Any],
    dry_run: bool,
    staging: TypedStaging | None,
) -> None:
    """Raise ``SpecValidationError`` with every problem of the evaluation, gate and registry steps,
    and (SageMaker, not a dry run) every missing bucket or empty input prefix (a staged channel's
    prefix is its staging source); not in a dry run, the registry kind's preflight (its server)."""
    from airflow_dist_training.errors import SpecValidationError
    from airflow_dist_training.pipeline_checks import check_steps

    s3 = None
    if g.record.on_aws and not dry_run:
        from airflow_dist_training.hooks.aws import aws_hook

        s3 = aws_hook("s3", **g.aws).get_conn()
    problems = check_steps(
        spec,
        backend=g.backend,
        evaluation=evaluation,
        gate=gate,
        registry=registry,
        inference_image=params.get("inference_image") or None,
        base_dir=g.base,
        staging=staging,
        s3=s3,
        conn_id=g.aws_conn_id,
    )
    if registry is not None and not dry_run and not any(p.severity == "error" for p in problems):
        from airflow_dist_training.spec.registries import registry_record

        problems += registry_record(registry.kind).check_reachable(registry)  # e.g. its server answers
    for warning in (p for p in problems if p.severity != "error"):
        print(f"WARNING          {warning}")
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise SpecValidationError(errors)


def _channel_dir(g: _Group, staging: TypedStaging) -> str:
    """The channel's local directory (its ``local_source``), which directory staging fills."""
    channel = g.spec.channels.get(staging.channel)
    target = getattr(channel, "local_source", None) or f".adt-demo/channels/{staging.channel}"
    return str((g.base / target).resolve())


def asset_kwargs(g: _Group, asset: Any, source: str) -> dict[str, Any]:
    """A staging task's arguments to update ``asset`` (none without one), with the fingerprint of
    the staged data at ``source`` in the event's extra."""
    if asset is None:
        return {}
    from airflow_dist_training.operators.retraining import data_asset_emitter

    emitter = data_asset_emitter(asset, source, base_dir=str(g.base), **g.aws)
    return {"outlets": [asset], "post_execute": emitter}


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _group_name(registry: TypedRegistry | None, spec: TrainingJobSpec) -> str:
    if registry is not None and registry.model_package_group:
        return registry.model_package_group
    return spec.name


def _local_registry_dir(registry: TypedRegistry | None, base: Path) -> str | None:
    if registry is None:
        return None
    directory = getattr(registry, "local_dir", None) or ".adt-demo/registry"
    return os.path.realpath(os.path.join(base, directory))


def fsx_staging_task(g: _Group, staging: FSxStaging, data_asset: Any) -> Any:
    """FSx: import the S3 prefix into the file system (a scratch one created for the run, if asked)."""
    from airflow_dist_training.operators.fsx import FSxStagePrefixOperator

    create, file_system_id = None, staging.file_system_id
    if staging.scratch_file_system is not None:
        create, file_system_id = _scratch_file_system(g, staging)
    stage = FSxStagePrefixOperator(
        task_id="stage",
        deferrable=g.defer,
        **asset_kwargs(g, data_asset, staging.source),
        s3_uri=staging.source,
        file_system_id=str(file_system_id),
        file_system_path=staging.file_system_path,
        subnets=list(g.spec.network.subnets),
        security_group_ids=list(g.spec.network.security_group_ids),
        **g.aws,
    )
    if create is not None:
        create >> stage
    return stage


def local_staging_task(g: _Group, staging: DirectoryStaging, data_asset: Any) -> Any:
    """Copy the dataset into the channel's local directory (the data asset fingerprints the copy)."""
    from airflow_dist_training.operators.fsx import LocalStageOperator

    channel = g.spec.channels.get(staging.channel)
    optional = {
        "file_system_id": staging.file_system_id or getattr(channel, "file_system_id", None),
        "file_system_path": staging.file_system_path,
    }
    return LocalStageOperator(
        task_id="stage",
        **asset_kwargs(g, data_asset, _channel_dir(g, staging)),
        source=staging.source if "://" in staging.source else str((g.base / staging.source).resolve()),
        channel_dir=_channel_dir(g, staging),
        **{k: v for k, v in optional.items() if v},  # type: ignore[arg-type]
        **g.aws,
    )


def _scratch_file_system(g: _Group, staging: FSxStaging) -> tuple[Any, str]:
    """Create a scratch file system for the run (and delete it as a teardown): (create task, its id)."""
    from airflow_dist_training.mapped_groups import xcom_field
    from airflow_dist_training.operators.fsx import FSxCreateFileSystemOperator, FSxDeleteFileSystemOperator

    scratch = staging.scratch_file_system
    assert scratch is not None
    create = FSxCreateFileSystemOperator(
        task_id="create_file_system",
        subnet_id=scratch.subnet_id,
        security_group_ids=list(scratch.security_group_ids),
        storage_capacity_gib=scratch.storage_capacity_gib,
        deployment_type=scratch.deployment_type,
        **g.aws,
    )
    file_system_id = xcom_field(create.task_id, "file_system_id")
    delete = FSxDeleteFileSystemOperator(task_id="delete_file_system", file_system_id=file_system_id, **g.aws)
    # the teardown runs when everything else in the group is done, even after a failure
    delete.as_teardown(setups=create)
    return create, file_system_id
