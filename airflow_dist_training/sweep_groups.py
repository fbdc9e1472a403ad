"""A hyperparameter sweep as one task group: train and evaluate every set, keep the best.

    <group>.members (mapped, one per set: plan -> check -> train -> checkpoints -> evaluate)
        -> <group>.best_of_sweep -> <group>.gate -> <group>.register

The sets come from ``spec/sweep.py`` (grid or seeded random), each a member of a mapped
``stage_train_evaluate`` group. ``best_of_sweep`` waits for every member (``all_done``: a member
that failed is listed, not fatal), picks the member with the best final objective metric
(``pick_best_member``: evaluation.json's metrics, else the training job's final metrics) and hands
its evaluation, training result and lineage on. Only the winner goes through the gate against the
group's champion, and only the winner is registered (one model package group for the sweep). Every
member's metrics are in the task's result and log.

The self-managed alternative to a SageMaker tuning job (``operators/tuning.py``): any backend, any
number of members side by side, and each member's job, checkpoints and logs are its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_dist_training.spec.pipeline import RegistryStep
    from airflow_dist_training.spec.sweep import SweepSpec
    from airflow_dist_training.spec.training import TrainingJobSpec

MEMBERS_GROUP = "members"


def sweep_train_evaluate(
    *,
    spec: TrainingJobSpec | Mapping[str, Any],
    sweep: SweepSpec | Mapping[str, Any],
    group_id: str = "sweep",
    gate: Mapping[str, Any] | None = None,
    registry: RegistryStep | None = None,
    fail_on_reject: bool = False,
    **group_kwargs: Any,
) -> Any:
    """Build the sweep's task group (members, best of the sweep, gate, register) and return it.

    :param spec: the training spec every member starts from.
    :param sweep: the hyperparameter sets and the objective (``SweepSpec`` or its dict).
    :param group_id: the outer task group's id.
    :param gate: quality-gate thresholds for the winner (``{"thresholds": {...}}``).
    :param registry: where the winner is registered (one group for the sweep).
    :param fail_on_reject: fail the run when the gate rejects the winner.
    :param group_kwargs: the other ``stage_train_evaluate`` arguments (backend, evaluation,
        checkpoints, base_dir, ...), applied to every member.
    """
    from airflow.sdk import TaskGroup

    from airflow_dist_training.spec.loading import load_spec
    from airflow_dist_training.spec.sweep import expand_sweep, load_sweep
    from airflow_dist_training.task_groups import stage_train_evaluate

    sweep_obj = load_sweep(sweep)
    spec_obj = load_spec(spec)
    members = expand_sweep(sweep_obj)
    with TaskGroup(group_id=group_id) as outer:
        # no gate or registry per member: only the winner is gated and registered
        mapped = stage_train_evaluate(spec=spec_obj, group_id=MEMBERS_GROUP, members=members, **group_kwargs)
        sets = {m.name: dict(m.hyperparameters) for m in members.members}
        evaluated = group_kwargs.get("evaluation") is not None  # else the training jobs' final metrics
        best = _best_of_sweep(f"{outer.group_id}.{MEMBERS_GROUP}.", sets, sweep_obj, evaluated)
        mapped >> best
        if gate is not None:
            _winner_gate_and_register(spec_obj, best, gate, registry, fail_on_reject, group_kwargs)
    return outer


def _best_of_sweep(prefix: str, sets: dict[str, dict[str, Any]], sweep: SweepSpec, evaluated: bool) -> Any:
    from airflow.providers.standard.operators.python import PythonOperator

    def best_of_sweep(**context: Any) -> dict[str, Any]:
        """Pick the member with the best final objective metric; hand its results on."""
        return pick_winner(context, prefix, sets, sweep, evaluated=evaluated)

    return PythonOperator(
        task_id="best_of_sweep",
        python_callable=best_of_sweep,
        trigger_rule="all_done",  # every member has ended, failed ones too
        doc_md=best_of_sweep.__doc__,
    )


def pick_winner(
    context: Mapping[str, Any],
    prefix: str,
    sets: Mapping[str, Mapping[str, Any]],
    sweep: SweepSpec,
    *,
    evaluated: bool = True,
) -> dict[str, Any]:
    """The winner's evaluation (returned), with its training result, lineage and the selection pushed.

    Fails the task (no retry: the members' results will not change) when no member can be picked."""
    from dataclasses import asdict

    from airflow_dist_training.compat import AirflowFailException
    from airflow_dist_training.mapped_groups import pull_all
    from airflow_dist_training.spec.sweep import SweepSelectionError, pick_best_member

    ti = context["ti"]
    names = list(sets)
    trainings = pull_all(ti, f"{prefix}train", len(names))
    evaluations = pull_all(ti, f"{prefix}evaluate", len(names)) if evaluated else [{}] * len(names)
    lineages = pull_all(ti, f"{prefix}check_changes", len(names), key="lineage")
    requests = pull_all(ti, f"{prefix}plan", len(names), key="request")
    outcomes = [_outcome(n, t, e) for n, t, e in zip(names, trainings, evaluations, strict=True)]
    try:
        selection = pick_best_member(outcomes, sweep.objective)
    except SweepSelectionError as exc:
        raise AirflowFailException(str(exc)) from None
    print(selection.summary(), flush=True)
    winner = names.index(selection.winner)
    ti.xcom_push(key="selection", value=selection.to_json())
    ti.xcom_push(key="winner", value=selection.winner)
    ti.xcom_push(key="training", value=trainings[winner])
    ti.xcom_push(key="lineage", value=lineages[winner])
    ti.xcom_push(key="request", value=requests[winner])  # its image: the registered model's default
    rows = [{**asdict(o), "hyperparameters": dict(sets[o.member])} for o in outcomes]
    ti.xcom_push(key="members", value=rows)
    return dict(evaluations[winner])


def _outcome(name: str, training: Any, evaluation: Any) -> Any:
    """A member's outcome: its final metrics (evaluation's over training's) once it was evaluated."""
    from airflow_dist_training.spec.sweep import MemberOutcome

    if not isinstance(training, Mapping):
        return MemberOutcome(
            name, "failed", reason="no training result (its train task failed or was skipped)"
        )
    metrics = dict(training.get("final_metrics") or {})
    if isinstance(evaluation, Mapping):
        metrics.update(evaluation.get("metrics") or {})
    elif evaluation is None:
        return MemberOutcome(name, "failed", reason="no evaluation result (its evaluate task failed)")
    return MemberOutcome(name, "succeeded", metrics=metrics)


def _winner_gate_and_register(
    spec: TrainingJobSpec,
    best: Any,
    gate: Mapping[str, Any],
    registry: RegistryStep | None,
    fail_on_reject: bool,
    group_kwargs: Mapping[str, Any],
) -> None:
    """The group's gate and registry steps, fed by the winner (``best`` returns its evaluation)."""
    from types import SimpleNamespace

    from airflow.sdk import XComArg

    from airflow_dist_training.spec.backends import backend_record
    from airflow_dist_training.spec.pipeline import resolve_steps
    from airflow_dist_training.task_groups import _gate_and_register, _Group, _local_registry_dir

    record = backend_record(str(group_kwargs.get("backend", "local")))
    _, typed_registry = resolve_steps(record, None, registry)
    base = Path(group_kwargs.get("base_dir") or Path.cwd())
    prefix = best.task_id.rsplit(".", 1)[0] + f".{MEMBERS_GROUP}."
    aws_conn_id = group_kwargs.get("aws_conn_id", "aws_default")
    registry_dir = _local_registry_dir(typed_registry, base)
    g = _Group(spec, record, base, prefix, aws_conn_id, group_kwargs.get("region_name"), None, registry_dir=registry_dir)
    # the winner's training result, as the gate and registry steps read a training task's
    winner_training = SimpleNamespace(output=XComArg(best, key="training"))
    _gate_and_register(g, winner_training, best, best, gate, typed_registry, fail_on_reject)
    register = best.dag.task_dict.get(best.task_id.replace("best_of_sweep", "register"))
    if register is not None and "key='request'" in str(register.image_uri):  # the planned image: the winner's
        register.image_uri = (
            f"{{{{ params.get('inference_image') or ti.xcom_pull(task_ids='{best.task_id}', key='request')"
            "['AlgorithmSpecification']['TrainingImage'] }}"
        )
