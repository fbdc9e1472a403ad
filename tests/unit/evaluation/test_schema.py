from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.schema import (
    EvaluationResult,
    evaluation_json_schema,
    load_evaluation_file,
    parse_evaluation,
    parse_evaluation_text,
)

SRC = "s3://bucket/eval/evaluation.json"


def test_full_document_round_trips() -> None:
    doc = {
        "schema_version": "1",
        "metrics": {"accuracy": 0.93, "loss": 0.21},
        "slices": {"lang=de": {"accuracy": 0.88}},
        "evaluation_set_hash": "sha256:" + "ab" * 32,
        "model": "s3://b/job/output/model.tar.gz",
        "details": {"samples": 1000},
    }
    result = parse_evaluation_text(json.dumps(doc), SRC)
    assert result.metrics == {"accuracy": 0.93, "loss": 0.21}
    assert result.metric("accuracy@lang=de") == 0.88
    assert result.metric("f1") is None
    assert result.metric_names() == ["accuracy", "loss", "accuracy@lang=de"]
    assert result.model_dump(mode="json") == doc


def test_minimal_document_and_integer_metrics() -> None:
    result = parse_evaluation({"metrics": {"errors": 3}}, SRC)
    assert result.metrics == {"errors": 3.0}
    assert result.slices == {} and result.evaluation_set_hash is None


def test_malformed_json_names_file_line_and_column() -> None:
    with pytest.raises(SpecValidationError) as exc:
        parse_evaluation_text('{\n  "metrics": {"accuracy": 0.9,}\n}', SRC)
    assert str(exc.value) == (
        f"{SRC}: malformed JSON at line 2, column 31: Expecting property name enclosed in double quotes"
    )


def test_non_numeric_metrics_are_each_named() -> None:
    with pytest.raises(SpecValidationError) as exc:
        parse_evaluation_text('{"metrics": {"accuracy": "high", "loss": null, "f1": true}}', SRC)
    assert str(exc.value).splitlines() == [
        f"{SRC}: metrics.accuracy: must be a number, got 'high'",
        f"{SRC}: metrics.loss: must be a number, got null",
        f"{SRC}: metrics.f1: must be a number, got true",
    ]


def test_nan_and_slice_metric_rejected() -> None:
    with pytest.raises(SpecValidationError) as exc:
        parse_evaluation_text('{"metrics": {"a": NaN}, "slices": {"en": {"a": "x"}}}', SRC)
    assert str(exc.value).splitlines() == [
        f"{SRC}: metrics.a: must be a finite number, got nan",
        f"{SRC}: slices.en.a: must be a number, got 'x'",
    ]


def test_missing_metrics_and_typo_field() -> None:
    with pytest.raises(SpecValidationError) as exc:
        parse_evaluation_text('{"metric": {"accuracy": 0.9}}', SRC)
    assert str(exc.value).splitlines() == [
        f"{SRC}: metric: unknown field (allowed: details, evaluation_set_hash, metrics, model, "
        "schema_version, slices)",
        f"{SRC}: metrics: is required (an object of metric name -> number)",
    ]


def test_empty_metrics_bad_hash_and_version() -> None:
    with pytest.raises(SpecValidationError) as exc:
        parse_evaluation({"schema_version": "2", "metrics": {}, "evaluation_set_hash": "md5"}, SRC)
    assert str(exc.value).splitlines() == [
        f"{SRC}: schema_version: unsupported version '2' (supported: '1')",
        f"{SRC}: metrics: must hold at least one metric",
        f"{SRC}: evaluation_set_hash: must look like 'sha256:<hex digest>', got 'md5'",
    ]


def test_not_an_object() -> None:
    with pytest.raises(SpecValidationError, match=r"must be a JSON object with a 'metrics' field, got \[1\]"):
        parse_evaluation_text("[1]", SRC)


def test_load_file_missing_and_present(tmp_path: Path) -> None:
    missing = tmp_path / "evaluation.json"
    with pytest.raises(SpecValidationError) as exc:
        load_evaluation_file(str(missing))
    assert str(exc.value) == (
        f"{missing}: file not found (did the evaluation script write evaluation.json to its output dir?)"
    )
    missing.write_text('{"metrics": {"accuracy": 1}}')
    assert load_evaluation_file(f"file://{missing}").metrics == {"accuracy": 1.0}


def test_json_schema_is_published() -> None:
    schema = evaluation_json_schema()
    assert schema["required"] == ["metrics"]
    assert set(schema["properties"]) == set(EvaluationResult.model_fields)
