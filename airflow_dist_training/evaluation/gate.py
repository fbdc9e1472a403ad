"""The quality gate: per-metric thresholds, checked against a challenger and (optionally) a champion.

Pure: standard library and pydantic only; the thresholds' model (``GateSpec``) is in
``spec/gate.py``. The vocabulary (``min``/``max``, ``no_regression``, ``min_improvement``,
``min_relative_improvement``, ``direction``) follows MLflow's ``MetricThreshold`` and SageMaker
Pipelines' ``ConditionStep`` (``docs/evaluation.md``). Champion-relative checks pass with a
``SKIP`` reason when there is no champion yet. The decision is a small JSON dict, one line a check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_dist_training.errors import Problem, SpecValidationError
from airflow_dist_training.evaluation.schema import EVALUATION_FILE_NAME, EvaluationResult
from airflow_dist_training.spec.gate import Direction, GateSpec, MetricThreshold, parse_gate_spec

__all__ = [  # the gate's spec lives in spec/gate.py; its names stay importable from here
    "Champion",
    "ChampionUnreadableError",
    "Direction",
    "GateSpec",
    "MetricThreshold",
    "evaluate_gate",
    "learning_checks",
    "parse_gate_spec",
    "summary",
]


class ChampionUnreadableError(SpecValidationError):
    """The champion's metrics cannot be read or lack a metric the gate compares."""


@dataclass(frozen=True)
class Champion:
    """The model to beat: the latest approved version in the registry, with its evaluation."""

    id: str  # model package ARN, or "<group>/<version>" in the local registry
    evaluation: EvaluationResult
    evaluation_uri: str | None = None
    version: int | None = None
    model_data_uri: str | None = None  # its model artifact (the gate refuses an identical one)
    lineage: Mapping[str, Any] | None = None  # data fingerprint, code and spec hash it was trained on

    @property
    def label(self) -> str:
        """``<group>/<version>`` for a SageMaker ARN, the id itself for the local registry."""
        if self.id.startswith("arn:") and "/" in self.id:
            return "/".join(self.id.split("/")[-2:])
        return self.id

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "model_data_uri": self.model_data_uri,
            "evaluation_uri": self.evaluation_uri,
            **_evaluation_dict(self.evaluation),
        }


def _evaluation_dict(evaluation: EvaluationResult) -> dict[str, Any]:
    return {
        "evaluation_set_hash": evaluation.evaluation_set_hash,
        "metrics": dict(evaluation.metrics),
        "slices": {k: dict(v) for k, v in evaluation.slices.items()},
    }


def check_thresholds_apply(evaluation: EvaluationResult, spec: GateSpec, source: str) -> None:
    """Every threshold must name a metric present in the challenger's evaluation."""
    available = evaluation.metric_names()
    problems = [
        Problem(
            f"thresholds.{name}",
            f"no metric {name!r} in {EVALUATION_FILE_NAME} {source} (it has: {', '.join(available)})",
        )
        for name in spec.thresholds
        if evaluation.metric(name) is None
    ]
    if problems:
        raise SpecValidationError(problems)


def check_champion_comparable(champion: Champion, spec: GateSpec) -> None:
    where = champion.evaluation_uri or "its evaluation report"
    problems = [
        Problem(
            f"metrics.{name}",
            f"missing from the champion's evaluation report {where}; cannot check {_champion_checks(t)}",
        )
        for name, t in spec.thresholds.items()
        if t.needs_champion and champion.evaluation.metric(name) is None
    ]
    if problems:
        raise ChampionUnreadableError(problems, source=f"champion {champion.id}")


def _champion_checks(t: MetricThreshold) -> str:
    checks = {"no_regression": t.no_regression or None, "min_improvement": t.min_improvement}
    checks["min_relative_improvement"] = t.min_relative_improvement
    return ", ".join(name for name, setting in checks.items() if setting is not None)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _signed(x: float) -> str:
    return f"{x:+.6g}"


def _check(metric: str, check: str, passed: bool | None, line: str, **values: Any) -> dict[str, Any]:
    status = "SKIP" if passed is None else ("PASS" if passed else "FAIL")
    return {
        "metric": metric,
        "check": check,
        "status": status,
        "reason": f"{status} {metric}: {line}",
        **values,
    }


def evaluate_gate(
    challenger: EvaluationResult,
    spec: GateSpec,
    champion: Champion | None = None,
    *,
    challenger_uri: str = EVALUATION_FILE_NAME,
    training: Mapping[str, Any] | None = None,
    same_model_as_champion: bool | None = None,
) -> dict[str, Any]:
    """Run every check; return the decision as a small JSON dict.

    ``training`` (the training task's result) and ``same_model_as_champion`` add the checks that
    the model learned (:func:`learning_checks`); they reject even when every threshold passes.

    ``{"passed", "reasons": [one line per check], "checks": [...], "challenger": {...},
    "champion": {...} | None, "thresholds": {...}, "require_same_evaluation_set"}``
    """
    check_thresholds_apply(challenger, spec, challenger_uri)
    if champion is not None:
        check_champion_comparable(champion, spec)
    checks: list[dict[str, Any]] = []
    for name, threshold in spec.thresholds.items():
        value = challenger.metric(name)
        assert value is not None  # check_thresholds_apply
        checks += _absolute_checks(name, threshold, value)
        checks += _champion_relative_checks(name, threshold, value, champion)
    checks += _evaluation_set_checks(challenger, spec, champion)
    checks.extend(learning_checks(training, same_model_as_champion, champion))
    passed = all(c["status"] != "FAIL" for c in checks)
    # Checks carry floats that may be +-inf (relative change against 0): keep XCom strict JSON.
    for c in checks:
        for key in ("value", "champion", "bound"):
            if isinstance(c.get(key), float) and not math.isfinite(c[key]):
                c[key] = None
    return {
        "passed": passed,
        "reasons": [c["reason"] for c in checks],
        "checks": checks,
        "challenger": {
            "evaluation_uri": challenger_uri,
            "model": challenger.model,
            **_evaluation_dict(challenger),
        },
        "champion": champion.to_dict() if champion is not None else None,
        "thresholds": {k: v.model_dump(exclude_defaults=True) for k, v in spec.thresholds.items()},
        "require_same_evaluation_set": spec.require_same_evaluation_set,
    }


def _absolute_checks(name: str, t: MetricThreshold, value: float) -> list[dict[str, Any]]:
    """``min`` / ``max``: bounds on the challenger alone."""
    return [
        _check(name, check, passed, f"{_fmt(value)} {op} {_fmt(bound)} ({check})", value=value, bound=bound)
        for check, op, bound, passed in (
            ("min", ">=", t.min, t.min is not None and value >= t.min),
            ("max", "<=", t.max, t.max is not None and value <= t.max),
        )
        if bound is not None
    ]


def absolute_failures(metrics: Mapping[str, float], spec: GateSpec) -> list[str]:
    """The ``min``/``max`` checks that ``metrics`` fail (one reason line each): what a champion
    re-evaluated on a new evaluation set must still meet (its own champion checks do not apply)."""
    return [
        check["reason"]
        for name, threshold in spec.thresholds.items()
        if (value := metrics.get(name)) is not None
        for check in _absolute_checks(name, threshold, float(value))
        if check["status"] == "FAIL"
    ]


def _champion_relative_checks(
    name: str, t: MetricThreshold, value: float, champion: Champion | None
) -> list[dict[str, Any]]:
    """``no_regression`` / ``min_improvement`` / ``min_relative_improvement`` (SKIP without a champion)."""
    if not t.needs_champion:
        return []
    if champion is None:
        return [
            _check(name, check, None, f"{check}: no champion yet (first approved model)")
            for check in _champion_checks(t).split(", ")
        ]
    base = champion.evaluation.metric(name)
    assert base is not None  # check_champion_comparable
    higher = t.direction == "higher_is_better"
    gain = value - base if higher else base - value  # > 0 means the challenger is better
    vs, values = f"vs champion {champion.id}", f"{_fmt(value)} vs {_fmt(base)}, {t.direction})"
    checks = []
    if t.no_regression:
        line = f"no regression {vs}: {_fmt(value)} {'>=' if higher else '<='} {_fmt(base)}"
        checks.append(_check(name, "no_regression", gain >= 0, line, value=value, champion=base))
    if (bound := t.min_improvement) is not None:
        line = f"improvement {vs}: {_signed(gain)} (required {_signed(bound)}; {values}"
        checks.append(
            _check(name, "min_improvement", gain >= bound, line, value=value, champion=base, bound=bound)
        )
    if (bound := t.min_relative_improvement) is not None:
        if base == 0:
            rel = math.inf if gain > 0 else (0.0 if gain == 0 else -math.inf)
        else:
            rel = gain / abs(base)
        rel_text = f"{rel * 100:+.4g}%" if math.isfinite(rel) else ("+inf%" if rel > 0 else "-inf%")
        line = f"relative improvement {vs}: {rel_text} (required {bound * 100:+.4g}%; {values}"
        checks.append(
            _check(
                name, "min_relative_improvement", rel >= bound, line, value=value, champion=base, bound=bound
            )
        )
    return checks


def _evaluation_set_checks(
    challenger: EvaluationResult, spec: GateSpec, champion: Champion | None
) -> list[dict[str, Any]]:
    """Challenger and champion evaluated on different sets: FAIL when required, else WARN."""
    if champion is None:
        return []
    mine, theirs = challenger.evaluation_set_hash, champion.evaluation.evaluation_set_hash
    if mine == theirs:
        return []
    line = f"evaluation sets differ: challenger {mine or 'unknown'} vs champion {theirs or 'unknown'}"
    if spec.require_same_evaluation_set:
        return [_check("evaluation_set_hash", "same_evaluation_set", False, line)]
    line += " (comparison may be unfair)"
    warning = _check("evaluation_set_hash", "same_evaluation_set", None, line)
    return [{**warning, "status": "WARN", "reason": f"WARN evaluation_set_hash: {line}"}]


# Training metrics that count what the job learned from (``train:epochs_trained``, ...).
LEARNING_METRICS = ("epochs_trained", "steps_trained")


def learning_checks(
    training: Mapping[str, Any] | None,
    same_model_as_champion: bool | None,
    champion: Champion | None,
) -> list[dict[str, Any]]:
    """Refuse a model that did not learn: zero epochs/steps trained, or the champion's own bytes.

    A run that resumed a finished checkpoint, or trained on nothing, produces a model the
    thresholds may well pass (it *is* the champion); registering it as new is the silent failure
    this check exists for.
    """
    checks: list[dict[str, Any]] = []
    if training is not None:
        metrics = dict(training.get("final_metrics") or {})
        counted = {
            name: value
            for name, value in metrics.items()
            if str(name).rsplit(":", 1)[-1] in LEARNING_METRICS and isinstance(value, int | float)
        }
        for name, value in sorted(counted.items()):
            unit = "epochs" if "epoch" in name else "steps"
            line = f"the training job trained {value:g} {unit} ({name}={value:g})"
            line += "" if value > 0 else ": the model did not learn"
            checks.append(_check("training", "learned", value > 0, line, value=value))
        if not counted:
            line = (
                f"the job reports no {' or '.join(LEARNING_METRICS)} metric; cannot tell whether it trained"
            )
            checks.append(_check("training", "learned", None, line))
    if same_model_as_champion is not None and champion is not None:
        line = f"model artifact differs from champion {champion.id}'s"
        if same_model_as_champion:
            line = f"model artifact is byte-identical to champion {champion.id}'s: the model did not learn"
        checks.append(_check("model", "differs_from_champion", not same_model_as_champion, line))
    return checks


def summary(decision: Mapping[str, Any]) -> str:
    """One multi-line text for logs and failure messages."""
    head = "quality gate PASSED" if decision["passed"] else "quality gate REJECTED the model"
    return "\n".join([head, *(f"  {r}" for r in decision["reasons"])])
