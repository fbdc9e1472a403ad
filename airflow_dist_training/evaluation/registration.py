"""What to register: approval status, the audit record, and the ``CreateModelPackage`` request.

Pure: no Airflow, no boto3. The hooks in ``airflow_dist_training.hooks.registry`` send what these
functions build, so the exact request is testable without AWS.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.storage.location import uri_scheme

APPROVED: Literal["Approved"] = "Approved"
PENDING: Literal["PendingManualApproval"] = "PendingManualApproval"
REJECTED: Literal["Rejected"] = "Rejected"
ApprovalStatus = Literal["Approved", "PendingManualApproval", "Rejected"]
AUDIT_FILE_NAME = "audit.json"
# CustomerMetadataProperties key holding the registration token: a retried register task finds
# the version it created (idempotent per run).
REGISTER_TOKEN_KEY = "AirflowRegisterToken"
AUDIT_VERSION = "1"

# SageMaker limits (CreateModelPackage API reference).
_GROUP_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_META_KEY = re.compile(r"^[\w\s.:/=+\-@]{1,128}$")
_META_VALUE = re.compile(r"^[\w\s.:/=+\-@]*$")
_MAX_META_VALUE = 256
_MAX_META_ENTRIES = 50
_MAX_DESCRIPTION = 1024


def approval_status(decision: Mapping[str, Any] | None, auto_approve: bool) -> ApprovalStatus:
    """Approved only when the gate passed *and* the user asked for auto-approval."""
    if decision is not None and decision.get("passed") is True and auto_approve:
        return APPROVED
    return PENDING


def validate_group_name(name: str, field: str = "model_package_group_name") -> str:
    if not isinstance(name, str) or not _GROUP_NAME.match(name):
        why = (
            f"{name!r} is not a valid model package group name (1-63 letters, digits and "
            "hyphens, starting with a letter or digit, no consecutive hyphens at the end)"
        )
        raise SpecValidationError([(field, why)])
    return name


def build_audit_record(
    *,
    decision: Mapping[str, Any] | None,
    status: str,
    registry: str,
    group: str,
    model_data_uri: str,
    image_uri: str | None,
    evaluation_uri: str | None,
    training: Mapping[str, Any] | None,
    registered_at: str,
    package_id: str | None = None,
    lineage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The promotion audit: why this version got this status, with both sides' metrics and lineage."""
    challenger = (decision or {}).get("challenger") or {}
    return {
        "lineage": dict(lineage) if lineage else None,
        "audit_version": AUDIT_VERSION,
        "registry": registry,
        "group": group,
        "package": package_id,
        "approval_status": status,
        "registered_at": registered_at,
        "model_data_uri": model_data_uri,
        "image_uri": image_uri,
        "evaluation_uri": evaluation_uri,
        "evaluation_set_hash": challenger.get("evaluation_set_hash"),
        "gate": None
        if decision is None
        else {
            "passed": decision.get("passed"),
            "reasons": list(decision.get("reasons", [])),
            "thresholds": decision.get("thresholds", {}),
            "require_same_evaluation_set": decision.get("require_same_evaluation_set", False),
        },
        "challenger": {"metrics": challenger.get("metrics", {}), "slices": challenger.get("slices", {})},
        "champion": (decision or {}).get("champion"),
        "training_job": None
        if not training
        else {
            "backend": training.get("backend"),
            "job_name": training.get("job_name"),
            "job_arn": training.get("job_arn"),
        },
    }


def _metadata(values: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    for key, given in values.items():
        if given is None or given == "":
            continue
        where, value = f"customer_metadata.{key}", str(given)
        if not _META_KEY.match(key):
            problems.append((where, "key must be 1-128 letters, digits or _.:/=+-@"))
        elif not _META_VALUE.match(value):
            problems.append((where, f"value {value!r} may only hold letters, digits, spaces and _.:/=+-@"))
        elif len(value) > _MAX_META_VALUE:
            problems.append((where, f"value is {len(value)} characters; SageMaker allows 256"))
        else:
            out[key] = value
    if len(out) > _MAX_META_ENTRIES:
        problems.append(("customer_metadata", f"{len(out)} entries; SageMaker allows 50"))
    if problems:
        raise SpecValidationError(problems)
    return out


def lineage_metadata(
    training: Mapping[str, Any] | None, decision: Mapping[str, Any] | None, audit_uri: str | None
) -> dict[str, str | None]:
    """CustomerMetadataProperties that link a package back to its training job and gate."""
    training = training or {}
    challenger = (decision or {}).get("challenger") or {}
    return {
        "TrainingJobName": training.get("job_name"),
        "TrainingJobArn": training.get("job_arn"),
        "TrainingBackend": training.get("backend"),
        "EvaluationSetHash": challenger.get("evaluation_set_hash"),
        "QualityGate": None if decision is None else ("passed" if decision.get("passed") else "rejected"),
        "AuditRecord": audit_uri,
    }


# Lineage keys -> CustomerMetadataProperties keys (values are checked against the API's limits).
_LINEAGE_METADATA = {
    "data_fingerprint": "DataFingerprint",
    "code_hash": "CodeHash",
    "spec_hash": "SpecHash",
    "evaluation_fingerprint": "EvaluationFingerprint",
    "run_id": "AirflowRunId",
    "dag_id": "AirflowDagId",
    "champion_compared_with": "ChampionComparedWith",
    "gate_decision": "GateDecision",
}


def build_lineage(
    inputs: Mapping[str, Any] | None,
    *,
    training: Mapping[str, Any] | None,
    decision: Mapping[str, Any] | None,
    run_id: str | None,
    dag_id: str | None,
) -> dict[str, Any]:
    """What one registered version was trained on and judged by (the audit record's ``lineage``)."""
    inputs = inputs or {}
    champion = (decision or {}).get("champion") or {}
    return {
        "data_fingerprint": inputs.get("data_fingerprint"),
        "code_hash": inputs.get("code_hash"),
        "spec_hash": inputs.get("spec_hash"),
        "evaluation_fingerprint": inputs.get("evaluation_fingerprint"),
        "channels": inputs.get("channels") or {},
        "training_job_name": (training or {}).get("job_name"),
        "run_id": run_id,
        "dag_id": dag_id,
        "champion_compared_with": champion.get("id"),
        "gate_decision": None if decision is None else ("passed" if decision.get("passed") else "rejected"),
    }


def lineage_from_metadata(metadata: Mapping[str, str] | None) -> dict[str, Any]:
    """Read a model package's lineage back from its ``CustomerMetadataProperties``."""
    metadata = metadata or {}
    return {key: metadata.get(meta) for key, meta in _LINEAGE_METADATA.items()}


def build_create_model_package_request(
    *,
    group: str,
    model_data_uri: str,
    image_uri: str,
    evaluation_uri: str,
    status: str,
    training: Mapping[str, Any] | None = None,
    decision: Mapping[str, Any] | None = None,
    audit_uri: str | None = None,
    report_uri: str | None = None,
    description: str | None = None,
    content_types: list[str] | None = None,
    response_types: list[str] | None = None,
    customer_metadata: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
    client_token: str | None = None,
    lineage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``CreateModelPackage`` kwargs for one model package version.

    With ``lineage`` (:func:`build_lineage`): its hashes, run id, champion and gate decision go to
    ``CustomerMetadataProperties`` (each value within 256 characters), and
    ``ModelMetrics.ModelDataQuality.Statistics`` points at the audit record that holds all of it.

    Lineage: ``MetadataProperties.GeneratedBy`` is the training job ARN (what SageMaker ML Lineage
    uses), ``CustomerMetadataProperties`` carries job name/ARN, the evaluation-set hash, the gate
    outcome and the audit record URI, and tags repeat the job name for search in the console.
    """
    validate_group_name(group)
    _check_package_inputs(model_data_uri, evaluation_uri, image_uri, description)
    metadata = _metadata(
        {
            **lineage_metadata(training, decision, audit_uri),
            "EvaluationReport": report_uri,
            **{meta: (lineage or {}).get(key) for key, meta in _LINEAGE_METADATA.items()},
            **(customer_metadata or {}),
        }
    )
    request: dict[str, Any] = {
        "ModelPackageGroupName": group,
        "ModelPackageDescription": description or _default_description(training, decision),
        "InferenceSpecification": {
            "Containers": [{"Image": image_uri, "ModelDataUrl": model_data_uri}],
            "SupportedContentTypes": list(content_types or ["application/json"]),
            "SupportedResponseMIMETypes": list(response_types or ["application/json"]),
        },
        "ModelMetrics": {
            "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": evaluation_uri}}
        },
        "ModelApprovalStatus": status,
        "CustomerMetadataProperties": metadata,
    }
    if lineage and uri_scheme(audit_uri) == "s3":
        request["ModelMetrics"]["ModelDataQuality"] = {
            "Statistics": {"ContentType": "application/json", "S3Uri": audit_uri}
        }
    job_arn = (training or {}).get("job_arn")
    if isinstance(job_arn, str) and job_arn.startswith("arn:"):
        request["MetadataProperties"] = {"GeneratedBy": job_arn}
    all_tags = dict(tags or {})
    job_name = (training or {}).get("job_name")
    if job_name:
        all_tags.setdefault("airflow-dist-training:training-job", str(job_name))
    if all_tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in all_tags.items()]
    if client_token:
        request["ClientToken"] = client_token[:36]
        request["CustomerMetadataProperties"][REGISTER_TOKEN_KEY] = client_token[:36]
    return request


def _check_package_inputs(
    model_data_uri: str, evaluation_uri: str, image_uri: str, description: str | None
) -> None:
    """Every problem of the arguments at once, before the request is built."""
    problems: list[tuple[str, str]] = []
    if uri_scheme(model_data_uri) != "s3":
        problems.append(("model_data_uri", f"must be an s3:// URI for SageMaker, got {model_data_uri!r}"))
    if uri_scheme(evaluation_uri) != "s3":
        why = f"must be an s3:// URI (ModelMetrics points SageMaker at it), got {evaluation_uri!r}"
        problems.append(("evaluation_uri", why))
    if not image_uri:
        problems.append(("image_uri", "is required for a SageMaker model package"))
    if description is not None and len(description) > _MAX_DESCRIPTION:
        problems.append(("description", f"is {len(description)} characters; SageMaker allows 1024"))
    if problems:
        raise SpecValidationError(problems)


def _default_description(training: Mapping[str, Any] | None, decision: Mapping[str, Any] | None) -> str:
    outcome = "not run" if decision is None else ("passed" if decision.get("passed") else "rejected")
    return f"Trained by {(training or {}).get('job_name') or 'unknown job'}; quality gate {outcome}"
