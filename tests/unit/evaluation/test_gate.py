from __future__ import annotations

import json

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.gate import (
    Champion,
    ChampionUnreadableError,
    evaluate_gate,
    parse_gate_spec,
    summary,
)
from airflow_dist_training.evaluation.schema import parse_evaluation

SRC = "/data/eval/evaluation.json"
H1 = "sha256:" + "1" * 64
H2 = "sha256:" + "2" * 64


def ev(metrics: dict[str, float], **kw: object) -> object:
    return parse_evaluation({"metrics": metrics, **kw}, SRC)


def champ(metrics: dict[str, float], **kw: object) -> Champion:
    return Champion(
        id="arn:aws:sagemaker:us-east-1:123456789012:model-package/g/3",
        evaluation=parse_evaluation({"metrics": metrics, **kw}, "s3://b/champ/evaluation.json"),
        evaluation_uri="s3://b/champ/evaluation.json",
        version=3,
    )


def test_absolute_bounds_pass_and_fail_with_one_line_per_check() -> None:
    spec = parse_gate_spec({"accuracy": {"min": 0.9}, "loss": {"direction": "lower_is_better", "max": 0.2}})
    decision = evaluate_gate(ev({"accuracy": 0.93, "loss": 0.21}), spec, None, challenger_uri=SRC)
    assert decision["passed"] is False
    assert decision["reasons"] == ["PASS accuracy: 0.93 >= 0.9 (min)", "FAIL loss: 0.21 <= 0.2 (max)"]
    assert decision["champion"] is None
    assert decision["challenger"]["evaluation_uri"] == SRC
    assert decision["thresholds"] == {
        "accuracy": {"min": 0.9},
        "loss": {"direction": "lower_is_better", "max": 0.2},
    }
    json.dumps(decision, allow_nan=False)  # strict JSON for XCom


def test_champion_checks_skip_when_there_is_no_champion() -> None:
    spec = parse_gate_spec({"accuracy": {"no_regression": True, "min_improvement": 0.01}})
    decision = evaluate_gate(ev({"accuracy": 0.5}), spec, None)
    assert decision["passed"] is True
    assert decision["reasons"] == [
        "SKIP accuracy: no_regression: no champion yet (first approved model)",
        "SKIP accuracy: min_improvement: no champion yet (first approved model)",
    ]


def test_no_regression_and_improvements_against_champion() -> None:
    spec = parse_gate_spec(
        {
            "accuracy": {"no_regression": True, "min_improvement": 0.01, "min_relative_improvement": 0.05},
            "loss": {"direction": "lower_is_better", "no_regression": True},
        }
    )
    decision = evaluate_gate(
        ev({"accuracy": 0.915, "loss": 0.25}, evaluation_set_hash=H1),
        spec,
        champ({"accuracy": 0.9, "loss": 0.2}, evaluation_set_hash=H1),
    )
    arn = "arn:aws:sagemaker:us-east-1:123456789012:model-package/g/3"
    assert decision["reasons"] == [
        f"PASS accuracy: no regression vs champion {arn}: 0.915 >= 0.9",
        f"PASS accuracy: improvement vs champion {arn}: +0.015 (required +0.01; 0.915 vs 0.9, higher_is_better)",
        f"FAIL accuracy: relative improvement vs champion {arn}: +1.667% (required +5%; 0.915 vs 0.9, "
        "higher_is_better)",
        f"FAIL loss: no regression vs champion {arn}: 0.25 <= 0.2",
    ]
    assert decision["passed"] is False
    assert decision["champion"]["metrics"] == {"accuracy": 0.9, "loss": 0.2}
    assert decision["champion"]["version"] == 3


def test_lower_is_better_improvement_sign() -> None:
    spec = parse_gate_spec({"loss": {"direction": "lower_is_better", "min_improvement": 0.05}})
    decision = evaluate_gate(ev({"loss": 0.1}), spec, champ({"loss": 0.2}))
    assert decision["passed"] is True
    assert (
        "improvement vs champion" in decision["reasons"][0]
        and "+0.1 (required +0.05" in decision["reasons"][0]
    )


def test_relative_improvement_against_zero_champion_is_json_safe() -> None:
    spec = parse_gate_spec({"score": {"min_relative_improvement": 0.1}})
    decision = evaluate_gate(ev({"score": 0.5}), spec, champ({"score": 0.0}))
    assert decision["passed"] is True
    assert "+inf%" in decision["reasons"][0]
    json.dumps(decision, allow_nan=False)


def test_slice_metric_threshold() -> None:
    spec = parse_gate_spec({"accuracy@lang=de": {"min": 0.9}})
    decision = evaluate_gate(ev({"accuracy": 0.95}, slices={"lang=de": {"accuracy": 0.85}}), spec)
    assert decision["reasons"] == ["FAIL accuracy@lang=de: 0.85 >= 0.9 (min)"]


def test_different_evaluation_sets_warn_or_fail() -> None:
    t = {"accuracy": {"no_regression": True}}
    d = evaluate_gate(
        ev({"accuracy": 0.95}, evaluation_set_hash=H1),
        parse_gate_spec(t),
        champ({"accuracy": 0.9}, evaluation_set_hash=H2),
    )
    assert d["passed"] is True
    assert (
        d["reasons"][-1]
        == f"WARN evaluation_set_hash: evaluation sets differ: challenger {H1} vs champion {H2} (comparison may be unfair)"
    )
    strict = parse_gate_spec(t, require_same_evaluation_set=True)
    d = evaluate_gate(ev({"accuracy": 0.95}, evaluation_set_hash=H1), strict, champ({"accuracy": 0.9}))
    assert d["passed"] is False
    assert (
        d["reasons"][-1]
        == f"FAIL evaluation_set_hash: evaluation sets differ: challenger {H1} vs champion unknown"
    )


def test_threshold_on_unknown_metric_names_metric_and_file() -> None:
    spec = parse_gate_spec({"f1": {"min": 0.8}, "accuracy": {"min": 0.5}})
    with pytest.raises(SpecValidationError) as exc:
        evaluate_gate(ev({"accuracy": 0.93, "loss": 0.2}), spec, None, challenger_uri=SRC)
    assert (
        str(exc.value) == f"thresholds.f1: no metric 'f1' in evaluation.json {SRC} (it has: accuracy, loss)"
    )


def test_champion_missing_compared_metric_names_champion_and_metric() -> None:
    spec = parse_gate_spec({"f1": {"no_regression": True}})
    with pytest.raises(ChampionUnreadableError) as exc:
        evaluate_gate(ev({"f1": 0.8}), spec, champ({"accuracy": 0.9}))
    assert str(exc.value) == (
        "champion arn:aws:sagemaker:us-east-1:123456789012:model-package/g/3: metrics.f1: missing from the "
        "champion's evaluation report s3://b/champ/evaluation.json; cannot check no_regression"
    )


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        (
            {"accuracy": {}},
            "thresholds.accuracy: has no check: give min, max, no_regression, min_improvement or "
            "min_relative_improvement",
        ),
        ({"accuracy": {"min": 0.9, "max": 0.5}}, "thresholds.accuracy: min (0.9) is greater than max (0.5)"),
        (
            {"accuracy": {"minimum": 0.9}},
            "thresholds.accuracy.minimum: unknown field (check the spelling; see "
            "`airflow-dist-training schema`)",
        ),
        (
            {"loss": {"direction": "down", "max": 1}},
            "thresholds.loss.direction: Input should be 'higher_is_better' or 'lower_is_better'",
        ),
        ({}, "thresholds: Dictionary should have at least 1 item after validation, not 0"),
    ],
)
def test_invalid_thresholds_name_the_field(thresholds: dict[str, object], message: str) -> None:
    with pytest.raises(SpecValidationError) as exc:
        parse_gate_spec(thresholds)
    assert str(exc.value) == message


def test_summary_text() -> None:
    spec = parse_gate_spec({"accuracy": {"min": 0.99}})
    text = summary(evaluate_gate(ev({"accuracy": 0.9}), spec))
    assert text == "quality gate REJECTED the model\n  FAIL accuracy: 0.9 >= 0.99 (min)"
