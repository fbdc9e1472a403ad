from __future__ import annotations

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.registration import (
    approval_status,
    build_audit_record,
    build_create_model_package_request,
)

TRAINING = {
    "backend": "sagemaker",
    "job_name": "train-abc123",
    "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/train-abc123",
    "model_artifact_uri": "s3://b/train-abc123/output/model.tar.gz",
}
DECISION = {
    "passed": True,
    "reasons": ["PASS accuracy: 0.93 >= 0.9 (min)"],
    "challenger": {"metrics": {"accuracy": 0.93}, "slices": {}, "evaluation_set_hash": "sha256:" + "a" * 64},
    "champion": None,
    "thresholds": {"accuracy": {"min": 0.9}},
}


@pytest.mark.parametrize(
    ("decision", "auto", "expected"),
    [
        (DECISION, True, "Approved"),
        (DECISION, False, "PendingManualApproval"),
        ({**DECISION, "passed": False}, True, "PendingManualApproval"),
        (None, True, "PendingManualApproval"),
    ],
)
def test_approved_only_when_gate_passed_and_auto_approve(decision, auto, expected) -> None:
    assert approval_status(decision, auto) == expected


def test_exact_create_model_package_request() -> None:
    request = build_create_model_package_request(
        group="churn-model",
        model_data_uri=TRAINING["model_artifact_uri"],
        image_uri="123.dkr.ecr.us-east-1.amazonaws.com/infer:1",
        evaluation_uri="s3://b/eval/evaluation.json",
        status="Approved",
        training=TRAINING,
        decision=DECISION,
        audit_uri="s3://b/eval/audit.json",
        report_uri="s3://b/eval/evaluation_report.html",
        tags={"team": "ml"},
        client_token="0123456789abcdef0123456789abcdef",
    )
    assert request == {
        "ModelPackageGroupName": "churn-model",
        "ModelPackageDescription": "Trained by train-abc123; quality gate passed",
        "InferenceSpecification": {
            "Containers": [
                {
                    "Image": "123.dkr.ecr.us-east-1.amazonaws.com/infer:1",
                    "ModelDataUrl": TRAINING["model_artifact_uri"],
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        "ModelMetrics": {
            "ModelQuality": {
                "Statistics": {"ContentType": "application/json", "S3Uri": "s3://b/eval/evaluation.json"}
            }
        },
        "ModelApprovalStatus": "Approved",
        "CustomerMetadataProperties": {
            "TrainingJobName": "train-abc123",
            "TrainingJobArn": TRAINING["job_arn"],
            "TrainingBackend": "sagemaker",
            "EvaluationSetHash": "sha256:" + "a" * 64,
            "QualityGate": "passed",
            "AuditRecord": "s3://b/eval/audit.json",
            "EvaluationReport": "s3://b/eval/evaluation_report.html",
            "AirflowRegisterToken": "0123456789abcdef0123456789abcdef",
        },
        "MetadataProperties": {"GeneratedBy": TRAINING["job_arn"]},
        "Tags": [
            {"Key": "team", "Value": "ml"},
            {"Key": "airflow-dist-training:training-job", "Value": "train-abc123"},
        ],
        "ClientToken": "0123456789abcdef0123456789abcdef",
    }


def test_request_rejects_local_uris_and_bad_group() -> None:
    with pytest.raises(SpecValidationError) as exc:
        build_create_model_package_request(
            group="churn-model",
            model_data_uri="/tmp/model.tar.gz",
            image_uri="",
            evaluation_uri="file:///tmp/evaluation.json",
            status="PendingManualApproval",
        )
    assert str(exc.value).splitlines() == [
        "model_data_uri: must be an s3:// URI for SageMaker, got '/tmp/model.tar.gz'",
        "evaluation_uri: must be an s3:// URI (ModelMetrics points SageMaker at it), got 'file:///tmp/evaluation.json'",
        "image_uri: is required for a SageMaker model package",
    ]
    with pytest.raises(SpecValidationError, match="'my_group' is not a valid model package group name"):
        build_create_model_package_request(
            group="my_group",
            model_data_uri="s3://b/m",
            image_uri="i",
            evaluation_uri="s3://b/e",
            status="Approved",
        )


def test_customer_metadata_value_rules() -> None:
    with pytest.raises(SpecValidationError) as exc:
        build_create_model_package_request(
            group="g",
            model_data_uri="s3://b/m",
            image_uri="i",
            evaluation_uri="s3://b/e",
            status="Approved",
            customer_metadata={"Owner": "a~b", "Long": "x" * 300},
        )
    assert str(exc.value).splitlines() == [
        "customer_metadata.Owner: value 'a~b' may only hold letters, digits, spaces and _.:/=+-@",
        "customer_metadata.Long: value is 300 characters; SageMaker allows 256",
    ]


def test_audit_record_holds_hash_thresholds_and_both_sides() -> None:
    champion = {"id": "g/1", "metrics": {"accuracy": 0.9}}
    audit = build_audit_record(
        decision={**DECISION, "champion": champion},
        status="Approved",
        registry="local",
        group="g",
        model_data_uri="/m.tar.gz",
        image_uri=None,
        evaluation_uri="/e/evaluation.json",
        training=TRAINING,
        registered_at="2026-01-01T00:00:00Z",
        package_id="g/2",
    )
    assert audit["evaluation_set_hash"] == "sha256:" + "a" * 64
    assert audit["gate"]["thresholds"] == {"accuracy": {"min": 0.9}}
    assert audit["gate"]["reasons"] == ["PASS accuracy: 0.93 >= 0.9 (min)"]
    assert audit["challenger"]["metrics"] == {"accuracy": 0.93}
    assert audit["champion"] == champion
    assert audit["training_job"] == {
        "backend": "sagemaker",
        "job_name": "train-abc123",
        "job_arn": TRAINING["job_arn"],
    }
