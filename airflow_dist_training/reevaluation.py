"""Re-evaluating the champion without retraining: the ``reevaluate`` and ``record_evaluation`` tasks.

When ``check_changes`` finds that only the evaluation's inputs changed since the champion (a new
held-out set, evaluation script or arguments) and the champion's model is still in its store, it
branches here instead of into training (``docs/retraining.md``, "A new evaluation set"):

- ``reevaluate`` runs the group's evaluation step (same kind: a local process or a SageMaker
  processing job) over the champion's model;
- ``record_evaluation`` records the result on the champion itself (no new version; the gate is not
  run: it would compare the champion with itself), so the next run's ``check_changes`` compares
  against the new evaluation and skips, and the next challenger is gated on the new set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def record_evaluation_task(g: Any, group: str, kind: str | None, thresholds: Mapping[str, Any]) -> Any:
    """The ``record_evaluation`` task (after ``reevaluate``): the result onto the member's champion;
    it fails, after recording, when the champion misses the gate's ``min``/``max`` on the new set."""
    from airflow.providers.standard.operators.python import PythonOperator

    check_id = f"{g.prefix}check_changes"

    def record(**context: Any) -> dict[str, Any]:
        """Record the champion's new evaluation on the champion (no new version)."""
        from airflow_dist_training.mapped_groups import pull_own

        ti = context["ti"]
        return record_reevaluation(
            context,
            evaluation=pull_own(ti, f"{g.prefix}reevaluate"),
            planned=pull_own(ti, check_id, "reevaluate"),
            registry=str(kind),
            group=g.member_value(context, group),  # a member's champion is its own group's
            local_registry_dir=g.registry_dir,
            thresholds=thresholds,
            **g.aws,
        )

    return PythonOperator(task_id="record_evaluation", python_callable=record, doc_md=record.__doc__)


def record_reevaluation(
    context: Mapping[str, Any],
    *,
    evaluation: Mapping[str, Any] | None,
    planned: Mapping[str, Any] | None,
    registry: str,
    group: str,
    local_registry_dir: str | None,
    thresholds: Mapping[str, Any] | None = None,
    aws_conn_id: str | None = "aws_default",
    region_name: str | None = None,
) -> dict[str, Any]:
    """Record ``evaluation`` (the ``reevaluate`` task's result) on the champion ``check_changes``
    planned to re-evaluate; refuse when another version became champion meanwhile.

    A champion that misses the gate's absolute ``thresholds`` on the new set fails the task once
    recorded (no retry: the scores will not change): the pipeline's model no longer meets the bar."""
    from airflow_dist_training.errors import Problem, SpecValidationError
    from airflow_dist_training.hooks.registry import get_registry

    if not evaluation or not planned or not evaluation.get("evaluation_uri"):
        raise SpecValidationError([Problem("reevaluate", "no evaluation of the champion to record")])
    target = get_registry(
        registry,
        group=group,
        local_registry_dir=local_registry_dir,
        aws_conn_id=aws_conn_id,
        region_name=region_name,
    )
    champion = target.get_champion()
    if champion is None or champion.id != planned["champion_id"]:
        now = "none" if champion is None else champion.label
        why = f"the champion changed since check_changes chose to re-evaluate {planned['champion']} (now: {now}); not recorded"
        raise SpecValidationError([Problem("champion", why)])
    ti = context["ti"]
    record = target.record_evaluation(
        champion,
        evaluation_uri=str(evaluation["evaluation_uri"]),
        evaluation_fingerprint=planned.get("evaluation_fingerprint"),
        run_id=getattr(ti, "run_id", None),
    )
    metrics = ", ".join(f"{k}={v:.4g}" for k, v in sorted(record["metrics"].items())) or "-"
    print(
        f"Re-evaluated {planned['champion']} on the new evaluation set ({metrics}); recorded on it, "
        "no new version: the next run compares against this evaluation",
        flush=True,
    )
    _fail_below_thresholds(str(planned["champion"]), record["metrics"], thresholds)
    return record


def _fail_below_thresholds(
    champion: str, metrics: Mapping[str, float], thresholds: Mapping[str, Any] | None
) -> None:
    from airflow_dist_training.compat import AirflowFailException
    from airflow_dist_training.evaluation.gate import absolute_failures
    from airflow_dist_training.spec.gate import parse_gate_spec

    failures = absolute_failures(metrics, parse_gate_spec(thresholds)) if thresholds else []
    if failures:
        raise AirflowFailException(
            f"Champion {champion} no longer meets the quality gate on the new evaluation set "
            f"(recorded on it): {'; '.join(failures)}. Retrain on new data or change the gate."
        )
