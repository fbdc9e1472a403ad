from __future__ import annotations

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.links.evaluation import uri_to_url
from airflow_dist_training.operators.evaluation import (
    EvaluationOperator,
    QualityGateOperator,
    RegisterModelOperator,
    coerce_evaluation,
)


def test_bad_threshold_is_a_parse_time_error_naming_the_field() -> None:
    with pytest.raises(SpecValidationError) as exc:
        QualityGateOperator(
            task_id="gate", evaluation="/x", thresholds={"accuracy": {"min": 0.9, "max": 0.1}}
        )
    assert str(exc.value) == "thresholds.accuracy: min (0.9) is greater than max (0.1)"


def test_registry_arguments_are_checked_at_parse_time() -> None:
    with pytest.raises(SpecValidationError) as exc:
        QualityGateOperator(task_id="gate", evaluation="/x", thresholds={"a": {"min": 0}}, registry="local")
    assert str(exc.value).splitlines() == [
        "model_package_group_name: is required when registry='local'",
        "local_registry_dir: is required when registry='local'",
    ]
    with pytest.raises(SpecValidationError, match="image_uri: is required when registry='sagemaker'"):
        RegisterModelOperator(
            task_id="r", evaluation="/x", model_package_group_name="g", model_data_uri="s3://b/m"
        )
    with pytest.raises(SpecValidationError) as exc:
        EvaluationOperator(task_id="e", script="s3://b/e.py", model_uri="s3://b/m", backend="sagemaker")
    assert str(exc.value).splitlines() == [
        "image_uri: is required for backend='sagemaker'",
        "role_arn: is required for backend='sagemaker'",
        "output_uri: is required for backend='sagemaker'",
    ]


def test_operators_serialise_with_links_and_templates() -> None:
    from airflow.sdk import DAG

    from airflow_dist_training.compat import DagSerialization

    with DAG("adt_eval_serialise", schedule=None) as dag:
        ev = EvaluationOperator(
            task_id="evaluate", script="/code/evaluate.py", model_uri="{{ params.model }}"
        )
        gate = QualityGateOperator(
            task_id="gate", evaluation=ev.output, thresholds={"accuracy": {"min": 0.9}}
        )
        reg = RegisterModelOperator(
            task_id="register",
            evaluation=ev.output,
            decision=gate.output,
            registry="local",
            model_package_group_name="g",
            local_registry_dir="/reg",
            model_data_uri="/m.tar.gz",
        )
        ev >> gate >> reg
    restored = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    assert set(restored.task_ids) == {"evaluate", "gate", "register"}
    assert "model_uri" in restored.get_task("evaluate").template_fields
    assert [type(link).__name__ for link in gate.operator_extra_links] == ["EvaluationReportLink"]
    assert gate.thresholds == {"accuracy": {"min": 0.9}}


def test_coerce_evaluation_accepts_operator_output_and_folder_uri(tmp_path) -> None:
    from airflow_dist_training.hooks.evaluation import ArtifactStore

    out = {
        "metrics": {"a": 1.0},
        "slices": {},
        "evaluation_set_hash": None,
        "model": None,
        "details": {},
        "schema_version": "1",
        "evaluation_uri": "/e/evaluation.json",
        "backend": "local",
    }
    result, uri = coerce_evaluation(out, ArtifactStore())
    assert uri == "/e/evaluation.json" and result.metrics == {"a": 1.0}
    (tmp_path / "evaluation.json").write_text('{"metrics": {"b": 2}}')
    result, uri = coerce_evaluation(str(tmp_path), ArtifactStore())
    assert uri == f"{tmp_path}/evaluation.json" and result.metrics == {"b": 2.0}


def test_report_urls() -> None:
    assert uri_to_url("s3://bkt/eval/run 1/evaluation_report.html", "eu-west-1") == (
        "https://s3.console.aws.amazon.com/s3/object/bkt?region=eu-west-1&prefix=eval/run%201/evaluation_report.html"
    )
    assert uri_to_url("/tmp/r.html") == "file:///tmp/r.html"
