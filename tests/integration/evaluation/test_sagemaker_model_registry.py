"""ModelRegistryHook against the moto server; Stubber for what moto lacks (listing model package tags)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from airflow_dist_training.evaluation.gate import ChampionUnreadableError
from airflow_dist_training.hooks.registry import ModelRegistryHook

pytestmark = pytest.mark.integration

BUCKET = "adt-eval-tests"
ARN_PREFIX = "arn:aws:sagemaker:us-east-1:123456789012:model-package"
TRAINING = {
    "backend": "sagemaker",
    "job_name": "train-1",
    "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/train-1",
    "model_artifact_uri": f"s3://{BUCKET}/train-1/output/model.tar.gz",
}


def put_eval(s3: Any, key: str, metrics: dict[str, float] | str) -> str:
    body = (
        metrics
        if isinstance(metrics, str)
        else json.dumps({"metrics": metrics, "evaluation_set_hash": "sha256:" + "d" * 64})
    )
    s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode())
    return f"s3://{BUCKET}/{key}"


def decision(passed: bool, champion: dict | None = None) -> dict:
    return {
        "passed": passed,
        "reasons": ["PASS accuracy: 0.93 >= 0.9 (min)"],
        "challenger": {
            "metrics": {"accuracy": 0.93},
            "slices": {},
            "evaluation_set_hash": "sha256:" + "d" * 64,
        },
        "champion": champion,
        "thresholds": {"accuracy": {"min": 0.9}},
        "report_uri": f"s3://{BUCKET}/eval/evaluation_report.html",
    }


def hook(group: str = "churn") -> ModelRegistryHook:
    return ModelRegistryHook(group, aws_conn_id=None, region_name="us-east-1")


def test_register_creates_missing_group_and_package_with_metrics_and_lineage(s3: Any, sagemaker: Any) -> None:
    uri = put_eval(s3, "eval/run1/evaluation.json", {"accuracy": 0.93})
    h = hook()
    assert h.get_champion() is None  # the group does not exist yet
    result = h.register(
        model_data_uri=TRAINING["model_artifact_uri"],
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/infer:1",
        evaluation_uri=uri,
        decision=decision(True),
        auto_approve=True,
        training=TRAINING,
        report_uri=f"s3://{BUCKET}/eval/run1/evaluation_report.html",
    )
    assert result == {
        "registry": "sagemaker",
        "group": "churn",
        "package_id": f"{ARN_PREFIX}/churn/1",
        "version": 1,
        "approval_status": "Approved",
        "model_data_uri": TRAINING["model_artifact_uri"],
        "evaluation_uri": uri,
        "audit_uri": f"s3://{BUCKET}/eval/run1/audit.json",
    }
    assert (
        sagemaker.describe_model_package_group(ModelPackageGroupName="churn")["ModelPackageGroupStatus"]
        == "Completed"
    )
    desc = sagemaker.describe_model_package(ModelPackageName=result["package_id"])
    assert desc["ModelApprovalStatus"] == "Approved"
    assert desc["ModelMetrics"] == {
        "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": uri}}
    }
    assert desc["InferenceSpecification"]["Containers"] == [
        {
            "Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/infer:1",
            "ModelDataUrl": TRAINING["model_artifact_uri"],
        }
    ]
    assert desc["MetadataProperties"] == {"GeneratedBy": TRAINING["job_arn"]}
    assert desc["CustomerMetadataProperties"]["TrainingJobName"] == "train-1"
    assert desc["CustomerMetadataProperties"]["AuditRecord"] == result["audit_uri"]
    audit = json.loads(s3.get_object(Bucket=BUCKET, Key="eval/run1/audit.json")["Body"].read())
    assert audit["package"] == result["package_id"]
    assert audit["evaluation_set_hash"] == "sha256:" + "d" * 64
    assert audit["gate"]["thresholds"] == {"accuracy": {"min": 0.9}}
    assert audit["challenger"]["metrics"] == {"accuracy": 0.93}


def test_gate_failed_or_no_auto_approve_registers_pending(s3: Any, sagemaker: Any) -> None:
    uri = put_eval(s3, "eval/evaluation.json", {"accuracy": 0.5})
    h = hook()
    common = dict(model_data_uri="s3://b/m.tar.gz", image_uri="img", evaluation_uri=uri, training=TRAINING)
    r1 = h.register(**common, decision=decision(False), auto_approve=True)
    r2 = h.register(**common, decision=decision(True), auto_approve=False)
    assert (r1["approval_status"], r2["approval_status"]) == (
        "PendingManualApproval",
        "PendingManualApproval",
    )
    assert h.get_champion() is None  # nothing approved


def test_champion_is_latest_approved_with_metrics_from_s3(s3: Any, sagemaker: Any) -> None:
    h = hook()
    for i, (acc, approve) in enumerate([(0.8, True), (0.85, True), (0.9, False)], start=1):
        uri = put_eval(s3, f"eval/{i}/evaluation.json", {"accuracy": acc})
        h.register(
            model_data_uri=f"s3://b/m{i}.tar.gz",
            image_uri="img",
            evaluation_uri=uri,
            decision=decision(True),
            auto_approve=approve,
            training=TRAINING,
        )
    champion = h.get_champion()
    assert champion is not None
    assert champion.id == f"{ARN_PREFIX}/churn/2"
    assert champion.evaluation.metrics == {"accuracy": 0.85}
    assert champion.evaluation_uri == f"s3://{BUCKET}/eval/2/evaluation.json"
    h.set_approval(f"{ARN_PREFIX}/churn/3", "Approved")
    assert h.get_champion().id == f"{ARN_PREFIX}/churn/3"  # type: ignore[union-attr]


def _approved_package(sagemaker: Any, metrics_uri: str | None) -> str:
    sagemaker.create_model_package_group(ModelPackageGroupName="churn")
    kwargs: dict[str, Any] = {
        "ModelPackageGroupName": "churn",
        "InferenceSpecification": {"Containers": [{"Image": "img", "ModelDataUrl": "s3://b/m.tar.gz"}]},
        "ModelApprovalStatus": "Approved",
    }
    if metrics_uri:
        kwargs["ModelMetrics"] = {
            "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": metrics_uri}}
        }
    return sagemaker.create_model_package(**kwargs)["ModelPackageArn"]


def test_champion_with_malformed_metrics_names_package_and_file(s3: Any, sagemaker: Any) -> None:
    uri = put_eval(s3, "champ/evaluation.json", '{"metrics": {"accuracy": 0.9')
    arn = _approved_package(sagemaker, uri)
    with pytest.raises(ChampionUnreadableError) as exc:
        hook().get_champion()
    assert str(exc.value) == (
        f"champion model package {arn} ({uri}): malformed JSON at line 1, column 29: Expecting ',' delimiter"
    )


def test_champion_with_non_numeric_metric(s3: Any, sagemaker: Any) -> None:
    uri = put_eval(s3, "champ/evaluation.json", '{"metrics": {"accuracy": "0.9"}}')
    arn = _approved_package(sagemaker, uri)
    with pytest.raises(ChampionUnreadableError) as exc:
        hook().get_champion()
    assert (
        str(exc.value)
        == f"champion model package {arn} ({uri}): metrics.accuracy: must be a number, got '0.9'"
    )


def test_champion_whose_report_is_gone(s3: Any, sagemaker: Any) -> None:
    uri = f"s3://{BUCKET}/champ/missing.json"
    arn = _approved_package(sagemaker, uri)
    with pytest.raises(ChampionUnreadableError) as exc:
        hook().get_champion()
    assert str(exc.value) == (f"champion model package {arn} ({uri}): cannot read: no such file")


def test_champion_without_model_metrics(s3: Any, sagemaker: Any) -> None:
    arn = _approved_package(sagemaker, None)
    with pytest.raises(ChampionUnreadableError) as exc:
        hook().get_champion()
    assert str(exc.value) == (
        f"champion model package {arn}: ModelMetrics.ModelQuality.Statistics: is not set (the package was "
        "registered without an evaluation report); cannot compare metrics against it"
    )


def _stubbed(h: ModelRegistryHook) -> Stubber:
    import boto3

    client = boto3.client("sagemaker", region_name="us-east-1")
    h.__dict__["client"] = client
    return Stubber(client)


def test_create_request_with_tags_and_client_token_exactly_as_sent() -> None:
    """moto accepts Tags at create but cannot list them back: check the wire request with Stubber."""
    h = hook()
    stub = _stubbed(h)
    h.__dict__["store"] = type("NoStore", (), {"write_text": lambda self, *a, **k: a[0]})()
    stub.add_response(
        "describe_model_package_group",
        {
            "ModelPackageGroupName": "churn",
            "ModelPackageGroupArn": "arn:aws:sagemaker:us-east-1:123456789012:model-package-group/churn",
            "CreationTime": "2026-01-01T00:00:00Z",
            "CreatedBy": {},
            "ModelPackageGroupStatus": "Completed",
        },
        {"ModelPackageGroupName": "churn"},
    )
    expected = {
        "ModelPackageGroupName": "churn",
        "ModelPackageDescription": "Trained by train-1; quality gate passed",
        "InferenceSpecification": {
            "Containers": [{"Image": "img", "ModelDataUrl": "s3://b/m.tar.gz"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
        "ModelMetrics": {
            "ModelQuality": {
                "Statistics": {"ContentType": "application/json", "S3Uri": "s3://b/e/evaluation.json"}
            }
        },
        "ModelApprovalStatus": "PendingManualApproval",
        "CustomerMetadataProperties": {
            "TrainingJobName": "train-1",
            "TrainingJobArn": TRAINING["job_arn"],
            "TrainingBackend": "sagemaker",
            "EvaluationSetHash": "sha256:" + "d" * 64,
            "QualityGate": "passed",
            "AuditRecord": "s3://b/e/audit.json",
            "EvaluationReport": f"s3://{BUCKET}/eval/evaluation_report.html",
            "AirflowRegisterToken": "tok-1",
        },
        "MetadataProperties": {"GeneratedBy": TRAINING["job_arn"]},
        "Tags": [
            {"Key": "team", "Value": "ml"},
            {"Key": "airflow-dist-training:training-job", "Value": "train-1"},
        ],
        "ClientToken": "tok-1",
    }
    # a retry would find its version among the newest ones: none here
    stub.add_response(
        "list_model_packages",
        {"ModelPackageSummaryList": []},
        {
            "ModelPackageGroupName": "churn",
            "SortBy": "CreationTime",
            "SortOrder": "Descending",
            "MaxResults": 10,
        },
    )
    stub.add_response("create_model_package", {"ModelPackageArn": f"{ARN_PREFIX}/churn/7"}, expected)
    with stub:
        r = h.register(
            model_data_uri="s3://b/m.tar.gz",
            image_uri="img",
            evaluation_uri="s3://b/e/evaluation.json",
            decision=decision(True),
            training=TRAINING,
            tags={"team": "ml"},
            client_token="tok-1",
            report_uri=f"s3://{BUCKET}/eval/evaluation_report.html",
        )
    assert r["version"] == 7 and r["approval_status"] == "PendingManualApproval"
    stub.assert_no_pending_responses()


LINEAGE = {
    "data_fingerprint": "sha256:" + "a" * 64,
    "code_hash": "sha256:" + "b" * 64,
    "spec_hash": "sha256:" + "c" * 64,
    "channels": {"train": {"fingerprint": "sha256:" + "a" * 64, "objects": 3, "bytes": 30}},
    "training_job_name": "train-1",
    "run_id": "scheduled__2026-12-07T02:00:00+00:00",
    "dag_id": "distributed_retraining",
    "champion_compared_with": None,
    "gate_decision": "passed",
}


def test_lineage_goes_to_customer_metadata_model_metrics_and_audit_and_comes_back_with_the_champion(
    s3: Any, sagemaker: Any
) -> None:
    uri = put_eval(s3, "eval/run7/evaluation.json", {"accuracy": 0.93})
    h = hook()
    kwargs: dict[str, Any] = dict(
        model_data_uri=TRAINING["model_artifact_uri"],
        image_uri="img",
        evaluation_uri=uri,
        decision=decision(True),
        auto_approve=True,
        training=TRAINING,
        lineage=LINEAGE,
        client_token="run-7-register",
    )
    result = h.register(**kwargs)
    desc = sagemaker.describe_model_package(ModelPackageName=result["package_id"])
    meta = desc["CustomerMetadataProperties"]
    assert (meta["DataFingerprint"], meta["CodeHash"], meta["SpecHash"]) == (
        LINEAGE["data_fingerprint"],
        LINEAGE["code_hash"],
        LINEAGE["spec_hash"],
    )
    assert meta["AirflowRunId"] == LINEAGE["run_id"] and meta["GateDecision"] == "passed"
    assert "ChampionComparedWith" not in meta  # no champion: no empty value sent
    assert desc["ModelMetrics"]["ModelDataQuality"] == {
        "Statistics": {"ContentType": "application/json", "S3Uri": result["audit_uri"]}
    }
    audit = json.loads(s3.get_object(Bucket=BUCKET, Key="eval/run7/audit.json")["Body"].read())
    assert audit["lineage"] == LINEAGE
    champion = h.get_champion()
    assert champion is not None and champion.model_data_uri == TRAINING["model_artifact_uri"]
    assert champion.lineage is not None
    assert champion.lineage["data_fingerprint"] == LINEAGE["data_fingerprint"]
    assert champion.lineage["spec_hash"] == LINEAGE["spec_hash"]
    assert champion.label == "churn/1"

    # the register task retried for the same run: no second version
    again = h.register(**kwargs)
    assert again["package_id"] == result["package_id"]
    summaries = sagemaker.list_model_packages(ModelPackageGroupName="churn")["ModelPackageSummaryList"]
    assert len(summaries) == 1


def test_a_re_evaluation_updates_the_champion_package_on_the_endpoint_and_registers_no_new_one(
    sagemaker_endpoint: Any,
) -> None:
    """On the test endpoint (UpdateModelPackage keeps what it is not sent, as SageMaker does)."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=sagemaker_endpoint.endpoint)
    sagemaker = boto3.client("sagemaker", endpoint_url=sagemaker_endpoint.endpoint)
    s3.create_bucket(Bucket=BUCKET)
    h = ModelRegistryHook("reevaluated", aws_conn_id=None, region_name=sagemaker_endpoint.region)
    h.register(
        model_data_uri=TRAINING["model_artifact_uri"],
        image_uri="img",
        evaluation_uri=put_eval(s3, "eval/run1/evaluation.json", {"accuracy": 0.93}),
        decision=decision(True),
        auto_approve=True,
        training=TRAINING,
        lineage={**LINEAGE, "evaluation_fingerprint": "sha256:old"},
    )
    champion = h.get_champion()
    assert champion is not None and champion.lineage is not None
    assert champion.lineage["evaluation_fingerprint"] == "sha256:old"
    body = json.dumps({"metrics": {"accuracy": 0.88}, "evaluation_set_hash": "sha256:" + "f" * 64})
    s3.put_object(Bucket=BUCKET, Key="eval/run3/evaluation.json", Body=body.encode())
    new_uri = f"s3://{BUCKET}/eval/run3/evaluation.json"
    record = h.record_evaluation(
        champion, evaluation_uri=new_uri, evaluation_fingerprint="sha256:new", run_id="run-3"
    )
    assert record["package_id"] == champion.id and record["metrics"] == {"accuracy": 0.88}
    summaries = sagemaker.list_model_packages(ModelPackageGroupName="reevaluated")["ModelPackageSummaryList"]
    assert len(summaries) == 1  # no new version
    desc = sagemaker.describe_model_package(ModelPackageName=champion.id)
    meta = desc["CustomerMetadataProperties"]
    assert (meta["CurrentEvaluation"], meta["EvaluationFingerprint"]) == (new_uri, "sha256:new")
    assert meta["EvaluationSetHash"] == "sha256:" + "f" * 64 and meta["ReevaluatedByRun"] == "run-3"
    assert meta["DataFingerprint"] == LINEAGE["data_fingerprint"]  # the rest of the lineage is kept
    assert desc["ModelApprovalStatus"] == "Approved"
    again = h.get_champion()
    assert again is not None and again.id == champion.id and again.evaluation.metrics == {"accuracy": 0.88}
    assert again.evaluation_uri == new_uri and again.lineage is not None
    assert again.lineage["evaluation_fingerprint"] == "sha256:new"
