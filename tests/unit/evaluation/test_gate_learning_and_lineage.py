"""The gate refuses a model that did not learn; registration records the lineage within API limits."""

from __future__ import annotations

import pytest

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.evaluation.gate import Champion, evaluate_gate, parse_gate_spec
from airflow_dist_training.evaluation.registration import (
    build_create_model_package_request,
    build_lineage,
    lineage_from_metadata,
)
from airflow_dist_training.evaluation.schema import parse_evaluation

SPEC = parse_gate_spec({"accuracy": {"min": 0.8, "no_regression": True}})
ARN = "arn:aws:sagemaker:us-east-1:123456789012:model-package/adt-demo/1"


def _champion() -> Champion:
    return Champion(
        id=ARN,
        evaluation=parse_evaluation({"metrics": {"accuracy": 0.9}}, "s3://b/c/evaluation.json"),
        evaluation_uri="s3://b/c/evaluation.json",
        version=1,
        model_data_uri="s3://b/c/model.tar.gz",
    )


def _decide(final_metrics: dict[str, float] | None, same: bool | None = None) -> dict:
    training = None if final_metrics is None else {"final_metrics": final_metrics}
    challenger = parse_evaluation({"metrics": {"accuracy": 0.9}}, "e.json")
    return evaluate_gate(challenger, SPEC, _champion(), training=training, same_model_as_champion=same)


def test_a_job_that_trained_zero_epochs_is_refused_although_every_threshold_passes():
    decision = _decide({"train:loss": 0.3, "train:epochs_trained": 0.0, "train:steps_trained": 0.0})
    assert decision["passed"] is False
    assert "PASS accuracy: 0.9 >= 0.8 (min)" in decision["reasons"]
    assert (
        "FAIL training: the training job trained 0 epochs (train:epochs_trained=0): the model did not learn"
        in decision["reasons"]
    )
    assert (
        "FAIL training: the training job trained 0 steps (train:steps_trained=0): the model did not learn"
        in decision["reasons"]
    )


def test_a_model_byte_identical_to_the_champions_is_refused():
    decision = _decide({"train:epochs_trained": 2.0}, same=True)
    assert decision["passed"] is False
    assert (
        f"FAIL model: model artifact is byte-identical to champion {ARN}'s: the model did not learn"
        in decision["reasons"]
    )
    assert "PASS training: the training job trained 2 epochs (train:epochs_trained=2)" in decision["reasons"]


def test_a_model_that_learned_passes_and_unknown_counts_are_said():
    assert _decide({"train:epochs_trained": 2.0}, same=False)["passed"] is True
    unknown = _decide({"train:loss": 0.3})
    assert unknown["passed"] is True
    assert any(
        r.startswith("SKIP training: the job reports no epochs_trained or steps_trained metric")
        for r in unknown["reasons"]
    )
    assert not any("training" in r for r in _decide(None)["reasons"])  # no training result given: no check


LINEAGE_INPUTS = {
    "data_fingerprint": "sha256:" + "a" * 64,
    "code_hash": "sha256:" + "b" * 64,
    "spec_hash": "sha256:" + "c" * 64,
    "evaluation_fingerprint": "sha256:" + "e" * 64,
    "channels": {"train": {"fingerprint": "sha256:" + "a" * 64, "objects": 3}},
}
DECISION = {"passed": True, "reasons": [], "champion": {"id": ARN}, "challenger": {}}
TRAINING = {
    "job_name": "adt-demo-9f3a",
    "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/adt-demo-9f3a",
}


def test_lineage_records_hashes_job_run_champion_and_decision():
    lineage = build_lineage(
        LINEAGE_INPUTS,
        training=TRAINING,
        decision=DECISION,
        run_id="scheduled__2026-12-07T02:00:00+00:00",
        dag_id="d",
    )
    assert lineage == {
        **LINEAGE_INPUTS,
        "training_job_name": "adt-demo-9f3a",
        "run_id": "scheduled__2026-12-07T02:00:00+00:00",
        "dag_id": "d",
        "champion_compared_with": ARN,
        "gate_decision": "passed",
    }


def test_model_package_request_carries_lineage_in_metadata_and_model_metrics():
    lineage = build_lineage(
        LINEAGE_INPUTS,
        training=TRAINING,
        decision=DECISION,
        run_id="manual__2026-12-01T12:00:00+00:00",
        dag_id="d",
    )
    request = build_create_model_package_request(
        group="adt-demo",
        model_data_uri="s3://b/m/model.tar.gz",
        image_uri="123.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.8",
        evaluation_uri="s3://b/e/evaluation.json",
        status="Approved",
        training=TRAINING,
        decision=DECISION,
        audit_uri="s3://b/e/audit.json",
        lineage=lineage,
    )
    meta = request["CustomerMetadataProperties"]
    assert meta["DataFingerprint"] == LINEAGE_INPUTS["data_fingerprint"]
    assert meta["CodeHash"] == LINEAGE_INPUTS["code_hash"]
    assert meta["SpecHash"] == LINEAGE_INPUTS["spec_hash"]
    assert meta["EvaluationFingerprint"] == LINEAGE_INPUTS["evaluation_fingerprint"]
    assert meta["AirflowRunId"] == "manual__2026-12-01T12:00:00+00:00"
    assert meta["ChampionComparedWith"] == ARN
    assert meta["GateDecision"] == "passed"
    assert meta["TrainingJobName"] == "adt-demo-9f3a"
    assert all(len(v) <= 256 for v in meta.values()) and len(meta) <= 50
    assert request["ModelMetrics"]["ModelDataQuality"] == {
        "Statistics": {"ContentType": "application/json", "S3Uri": "s3://b/e/audit.json"}
    }
    assert lineage_from_metadata(meta) == {
        k: v for k, v in lineage.items() if k not in ("channels", "training_job_name")
    }


def test_a_lineage_value_beyond_the_api_limit_is_a_field_error_not_a_rejected_call():
    with pytest.raises(SpecValidationError, match=r"customer_metadata\.AirflowRunId"):
        build_create_model_package_request(
            group="adt-demo",
            model_data_uri="s3://b/m/model.tar.gz",
            image_uri="img",
            evaluation_uri="s3://b/e/evaluation.json",
            status="Approved",
            lineage={"run_id": "r" * 300},
        )
