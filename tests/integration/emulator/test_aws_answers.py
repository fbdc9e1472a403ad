"""The endpoint answers like AWS toward any client: unimplemented actions, IAM role checks, STS."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from airflow_dist_training.emulator.aws import SERVICES

# moto's S3 dispatches by hand (no method per action): an action it lacks, with its parameters
S3_UNIMPLEMENTED = (
    "CreateBucketMetadataConfiguration",
    {
        "MetadataConfiguration": {
            "JournalTableConfiguration": {"RecordExpiration": {"Expiration": "DISABLED"}}
        }
    },
)


def _moto_methods(service: str) -> set[str]:
    from moto.core.responses import BaseResponse

    module = importlib.import_module(f"moto.{service}.responses")
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, BaseResponse)]
    return {name for c in classes for name in dir(c)}


def _dummy(shape: Any) -> Any:
    """A value botocore accepts for a required member (the endpoint answers before reading it)."""
    if shape.type_name == "structure":
        return {m: _dummy(shape.members[m]) for m in shape.required_members}
    if shape.type_name == "list":
        return [_dummy(shape.member)]
    if shape.type_name == "map":
        return {}
    if shape.type_name in ("integer", "long"):
        return max(1, int(shape.metadata.get("min", 1)))
    if shape.type_name == "boolean":
        return True
    if shape.type_name == "timestamp":
        return 0
    if shape.type_name == "blob":
        return b"x"
    enum = shape.metadata.get("enum")
    return enum[0] if enum else "x" * max(1, int(shape.metadata.get("min", 1)))


def unimplemented_call(service: str) -> tuple[str, dict[str, Any]]:
    """An action of ``service`` that moto does not implement, with parameters botocore accepts."""
    if service == "s3":
        return S3_UNIMPLEMENTED
    from moto.core.utils import camelcase_to_underscores

    model = botocore.session.get_session().get_service_model(service)
    methods = _moto_methods(service)
    for op in model.operation_names:
        if camelcase_to_underscores(op) not in methods:
            shape = model.operation_model(op).input_shape
            return op, _dummy(shape) if shape is not None else {}
    raise AssertionError(f"moto implements every {service} action")


@pytest.mark.parametrize("service", SERVICES)
def test_an_unimplemented_action_is_an_aws_error_naming_it(sagemaker_endpoint: Any, service: str) -> None:
    operation, params = unimplemented_call(service)
    import boto3

    client = boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url=sagemaker_endpoint.endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}),
    )
    if service == "s3":
        client.create_bucket(Bucket="not-implemented")
        params = {"Bucket": "not-implemented", **params}
    from moto.core.utils import camelcase_to_underscores

    with pytest.raises(ClientError) as err:
        getattr(client, camelcase_to_underscores(operation))(**params)
    error = err.value.response["Error"]
    assert error["Code"] == "NotImplemented", (service, operation, err.value.response)
    assert f"{service}:{operation}" in error["Message"]
    assert "does not implement" in error["Message"]
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 501


def test_role_validation_allows_by_default(sagemaker_endpoint: Any) -> None:
    """What SDK v3's role validation and the Amazon provider's role lookups call."""
    iam = sagemaker_endpoint.client("iam")
    role = iam.get_role(RoleName="SageMakerExecutionRole")["Role"]
    assert role["Arn"] == "arn:aws:iam::123456789012:role/service-role/SageMakerExecutionRole"
    assert "sagemaker.amazonaws.com" in str(role["AssumeRolePolicyDocument"])
    answer = iam.simulate_principal_policy(
        PolicySourceArn=role["Arn"],
        ActionNames=["sagemaker:CreateTrainingJob", "s3:GetObject"],
        ResourceArns=["arn:aws:s3:::bucket/key"],
    )
    assert [
        (r["EvalActionName"], r["EvalResourceName"], r["EvalDecision"]) for r in answer["EvaluationResults"]
    ] == [
        ("sagemaker:CreateTrainingJob", "arn:aws:s3:::bucket/key", "allowed"),
        ("s3:GetObject", "arn:aws:s3:::bucket/key", "allowed"),
    ]
    assert sagemaker_endpoint.client("sts").get_caller_identity()["Account"] == "123456789012"


def test_list_training_jobs_filters_sorts_then_pages_and_search_answers_the_record(
    sagemaker_endpoint: Any,
) -> None:
    """Records only (moto's, no job runs): what ListTrainingJobs and Search answer over them."""
    from moto.sagemaker.models import FakeTrainingJob

    from airflow_dist_training.emulator.records import matching_training_jobs

    def job(name: str, status: str, minute: int) -> Any:
        j = FakeTrainingJob.__new__(FakeTrainingJob)
        j.training_job_name, j.training_job_status = name, status
        j.creation_time = j.last_modified_time = __import__("datetime").datetime(2026, 1, 1, 0, minute)
        return j

    jobs = [job("Alpha-1", "Completed", 3), job("beta-2", "Failed", 1), job("alpha-3", "Completed", 2)]
    kept = matching_training_jobs(
        jobs, {"NameContains": "ALPHA", "StatusEquals": "Completed", "SortOrder": "Descending"}
    )
    assert [j.training_job_name for j in kept] == ["Alpha-1", "alpha-3"]
    by_name = matching_training_jobs(jobs, {"SortBy": "Name", "CreationTimeAfter": 1767225690})
    assert [j.training_job_name for j in by_name] == ["Alpha-1", "alpha-3"]  # after 00:01:30

    sm = sagemaker_endpoint.client("sagemaker")
    assert sm.list_training_jobs(NameContains="nothing-matches")["TrainingJobSummaries"] == []
    assert sm.search(Resource="TrainingJob")["Results"] == []
