"""The end-of-run summary the ready DAGs print: metrics, the gate decision, where the model went."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _pull(ti: Any, task_id: str, key: str = "return_value") -> Any:
    try:
        return ti.xcom_pull(task_ids=task_id, key=key)
    except Exception:  # a skipped or missing task has no XCom
        return None


def run_summary(
    context: Mapping[str, Any], groups: Sequence[str], write_to: str | Path | None = None
) -> dict[str, Any]:
    """Collect the results of whichever group ran; print them (and write them to ``write_to``)."""
    ti = context["ti"]
    from airflow_dist_training.planning import PLAN_XCOM_KEYS

    for group in groups:
        plan = {key: _pull(ti, f"{group}.plan", key) for key in PLAN_XCOM_KEYS}
        if plan["summary"]:
            break
    else:
        print("Nothing ran.")
        return {}
    skip_reason = _pull(ti, f"{group}.check_changes", "skip_reason")
    skipped = bool(_pull(ti, f"{group}.check_changes", "skipped"))
    training = _pull(ti, f"{group}.train") or {}
    evaluation = _pull(ti, f"{group}.evaluate") or {}
    decision = _pull(ti, f"{group}.gate") or {}
    registration = _pull(ti, f"{group}.register") or {}
    result = {
        "backend": plan.get("backend"),
        "job_name": training.get("job_name") or plan.get("job_name"),
        "dry_run": bool(plan.get("dry_run")),
        "training_metrics": training.get("final_metrics", {}),
        "evaluation_metrics": evaluation.get("metrics", {}),
        "gate_passed": decision.get("passed"),
        "gate_reasons": decision.get("reasons", []),
        "model_artifact_uri": training.get("model_artifact_uri"),
        "registered": registration or None,
        "skipped": skipped,
        "skip_reason": skip_reason,
    }
    text = render_summary(result, plan)
    print(text)
    if write_to is not None:
        Path(write_to).parent.mkdir(parents=True, exist_ok=True)
        Path(write_to).write_text(text + "\n", encoding="utf-8")
    return result


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
    if result.get("skip_reason"):
        lines.append(f"Why trained         {result['skip_reason']}")
    lines += [
        f"Training job        {result['job_name']}",
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
