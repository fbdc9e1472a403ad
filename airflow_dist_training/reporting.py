"""The end-of-run summary the ready DAGs print: metrics, the gate decision, where the model went."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _pull(ti: Any, task_id: str, key: str = "return_value", map_index: int | None = None) -> Any:
    try:
        if map_index is None:
            return ti.xcom_pull(task_ids=task_id, key=key)
        return ti.xcom_pull(task_ids=task_id, key=key, map_indexes=map_index)
    except Exception:  # a skipped or missing task has no XCom
        return None


def _group_result(
    ti: Any, group: str, plan: Mapping[str, Any], map_index: int | None = None
) -> dict[str, Any]:
    """What one group (one member of a mapped group) did, from its tasks' XComs."""

    def pull(task: str, key: str = "return_value") -> Any:
        return _pull(ti, f"{group}.{task}", key, map_index)

    training = pull("train") or {}
    evaluation = pull("evaluate") or {}
    decision = pull("gate") or {}
    return {
        "backend": plan.get("backend"),
        "job_name": training.get("job_name") or plan.get("job_name"),
        "dry_run": bool(plan.get("dry_run")),
        "training_metrics": training.get("final_metrics", {}),
        "resumed_from": training.get("resumed_from"),
        "evaluation_metrics": evaluation.get("metrics", {}),
        "gate_passed": decision.get("passed"),
        "gate_reasons": decision.get("reasons", []),
        "model_artifact_uri": training.get("model_artifact_uri"),
        "registered": pull("register") or None,
        "skipped": bool(pull("check_changes", "skipped")),
        "skip_reason": pull("check_changes", "skip_reason"),
        "reevaluated": pull("check_changes", "action") == "reevaluate",
        "reevaluation": pull("reevaluate") or {},
        "recorded": pull("record_evaluation") or None,
    }


def run_summary(
    context: Mapping[str, Any],
    groups: Sequence[str],
    write_to: str | Path | None = None,
    members: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Collect the results of whichever group ran; print them (and write them to ``write_to``).

    ``members``: the groups are mapped over these members; every member is listed, and a member
    whose tasks failed says so (the others' results are still shown)."""
    ti = context["ti"]
    from airflow_dist_training.planning import PLAN_XCOM_KEYS

    indexes: list[int | None] = list(range(len(members))) if members else [None]  # map indexes
    for group in groups:
        plans = [{key: _pull(ti, f"{group}.plan", key, i) for key in PLAN_XCOM_KEYS} for i in indexes]
        if any(plan["summary"] for plan in plans):
            break
    else:
        print("Nothing ran.")
        return {}
    if not members:
        result = _group_result(ti, group, plans[0])
        text = render_summary(result, plans[0])
    else:  # every member, those whose plan failed too
        results = [
            {"member": member, "planned": bool(plan["summary"]), **_group_result(ti, group, plan, index)}
            for index, (member, plan) in enumerate(zip(members, plans, strict=True))
        ]
        result = {"members": results}
        text = "\n".join(_render_member(r, plan) for r, plan in zip(results, plans, strict=True))
    print(text)
    if write_to is not None:
        Path(write_to).parent.mkdir(parents=True, exist_ok=True)
        Path(write_to).write_text(text + "\n", encoding="utf-8")
    return result


def _render_member(result: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """One member's summary, headed by its name; a member that did not finish says so."""
    header = f"Member {result['member']}"
    if not result.get("planned"):
        return "\n".join(
            ["", "=" * 72, header, "=" * 72, "FAILED before planning (see the member's plan task log)"]
        )
    text = render_summary(result, plan).replace(
        "Retraining run summary", f"{header}: retraining run summary", 1
    )
    if not any(result.get(k) for k in ("skipped", "dry_run", "training_metrics", "registered")):
        text = text.replace(
            f"Training job        {result['job_name']}",
            f"Training job        {result['job_name']} (did not finish: see the member's train task log)",
        )
    return text


def render_summary(result: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    def metrics(values: Mapping[str, Any]) -> str:
        return (
            ", ".join(f"{k}={v:.4g}" if isinstance(v, int | float) else f"{k}={v}" for k, v in values.items())
            or "-"
        )

    lines = ["", "=" * 72, f"Retraining run summary ({result['backend']} backend)", "=" * 72]
    if result["dry_run"]:
        lines += ["DRY RUN: nothing was launched. The plan:", plan.get("summary", "")]
        return "\n".join(lines)
    if result.get("skipped"):
        lines += [
            f"SKIPPED: {result.get('skip_reason')}",
            "Training job        not created (train, evaluate, gate and register skipped)",
            "Registered          no (nothing new to train on; set force=true to train anyway)",
            "=" * 72,
        ]
        return "\n".join(lines)
    if result.get("reevaluated"):
        lines += _reevaluation_lines(result, metrics)
        return "\n".join(lines)
    if result.get("skip_reason"):
        lines.append(f"Why trained         {result['skip_reason']}")
    lines.append(f"Training job        {result['job_name']}")
    if resumed := result.get("resumed_from"):  # the job continued a checkpoint of this run
        lines.append(f"Resumed             from step {resumed['step']} after {resumed['after']}")
    lines += [
        f"Training metrics    {metrics(result['training_metrics'])}",
        f"Evaluation metrics  {metrics(result['evaluation_metrics'])}",
    ]
    gate = result["gate_passed"]
    lines.append(f"Quality gate        {'PASSED' if gate else 'REJECTED' if gate is False else 'not run'}")
    lines += [f"                    {reason}" for reason in result["gate_reasons"]]
    lines.append(f"Model artifact      {result['model_artifact_uri'] or '-'}")
    registered = result["registered"]
    if registered:
        where = registered.get("model_package_arn") or registered.get("package_id") or "?"
        lines.append(f"Registered          {where} ({registered.get('approval_status', 'unknown status')})")
        if registered.get("audit_uri"):
            lines.append(f"Audit record        {registered['audit_uri']}")
    else:
        lines.append("Registered          no (gate rejected or no registry)")
    lines.append("=" * 72)
    return "\n".join(lines)


def _reevaluation_lines(result: Mapping[str, Any], metrics: Any) -> list[str]:
    """A run that re-evaluated the champion on a new evaluation set instead of training."""
    recorded = result.get("recorded")
    evaluation = result.get("reevaluation") or {}
    where = "no (see the reevaluate and record_evaluation task logs)"
    if recorded:
        where = f"on {recorded.get('package_id')}, no new version ({recorded.get('evaluation_uri')})"
    return [
        f"RE-EVALUATED: {result.get('skip_reason')}",
        "Training job        not created (train, evaluate, gate and register skipped)",
        f"Evaluation metrics  {metrics(evaluation.get('metrics') or {})}",
        f"Evaluation set      {evaluation.get('evaluation_set_hash') or '-'}",
        "Quality gate        not run (the champion is not gated against itself)",
        f"Recorded            {where}",
        "=" * 72,
    ]


def sweep_summary(
    context: Mapping[str, Any], group: str, write_to: str | Path | None = None
) -> dict[str, Any]:
    """A sweep's summary (``sweep_groups``): every member's metrics and status, the winner, the
    gate's decision on it and where it was registered; printed (and written to ``write_to``)."""
    ti = context["ti"]
    selection = _pull(ti, f"{group}.best_of_sweep", "selection") or {}
    rows = _pull(ti, f"{group}.best_of_sweep", "members") or []
    decision = _pull(ti, f"{group}.gate") or {}
    registration = _pull(ti, f"{group}.register") or None
    lines = ["", "=" * 72, f"Sweep summary ({len(rows)} members)", "=" * 72]
    for row in rows:
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in sorted(row["metrics"].items())) or "-"
        mark = "WINNER " if row["member"] == selection.get("winner") else ""
        state = row["status"] if row["status"] != "succeeded" else "finished"
        chosen = " ".join(f"{k}={v}" for k, v in (row.get("hyperparameters") or {}).items())
        lines.append(
            f"{mark}{row['member']:<12} {chosen} {state:<9} {metrics}"
            + (f" ({row['reason']})" if row.get("reason") else "")
        )
    lines += (selection.get("summary") or "no member could be picked").splitlines()[:1]
    gate = decision.get("passed")
    lines.append(f"Quality gate        {'PASSED' if gate else 'REJECTED' if gate is False else 'not run'}")
    lines += [f"                    {reason}" for reason in decision.get("reasons", [])]
    if registration:
        where = registration.get("model_package_arn") or registration.get("package_id") or "?"
        lines.append(f"Registered          {where} ({registration.get('approval_status', 'unknown status')})")
    else:
        lines.append("Registered          no (gate rejected, no winner or no registry)")
    lines.append("=" * 72)
    text = "\n".join(lines)
    print(text)
    if write_to is not None:
        Path(write_to).parent.mkdir(parents=True, exist_ok=True)
        Path(write_to).write_text(text + "\n", encoding="utf-8")
    return {"selection": selection, "members": rows, "gate_passed": gate, "registered": registration}
