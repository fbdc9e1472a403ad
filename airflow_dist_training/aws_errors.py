"""AWS error codes, throttling and permission messages: the one place that reads a ``ClientError``.

Pure (no boto3 at import time): hooks, triggers, sensors and pre-flight checks classify errors with
the functions here instead of each parsing ``exc.response["Error"]["Code"]`` and keeping its own
code lists. The retry *loops* live in ``airflow_dist_training.retry``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from airflow_dist_training.errors import AwsPermissionError
from airflow_dist_training.storage.location import split_uri

#: Error codes AWS services answer when they rate-limit a caller.
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "SlowDown",
        "PriorRequestNotComplete",
    }
)
#: Codes worth retrying: throttling plus server-side failures and timeouts.
TRANSIENT_CODES = THROTTLING_CODES | frozenset(
    {
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
#: Codes meaning "the caller's identity lacks a permission" (S3 HEAD answers a bare "403").
ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "AllAccessDisabled",
        "Forbidden",
        "403",
    }
)
#: Codes meaning "no such resource" across the services we call.
NOT_FOUND_CODES = frozenset({"ResourceNotFound", "ResourceNotFoundException", "404", "NotFound", "NoSuchKey"})

#: Codes of a create call that found the name taken: the job exists (reattach to it).
ALREADY_EXISTS_CODES = frozenset({"ResourceInUse", "ResourceInUseException"})
#: Codes of a create call refused for want of capacity or quota: retry later (``CapacityError``).
CAPACITY_CODES = frozenset({"ResourceLimitExceeded", "InsufficientCapacityError", "CapacityError"})

#: Fragments (lowercase) of a finished job's FailureReason or SecondaryStatus that mean "no capacity",
#: not "your code is broken": retryable (``CapacityError``), counted against the interruption budget.
CAPACITY_MARKERS = (
    "capacityerror",
    "insufficientcapacity",
    "insufficientinstancecapacity",
    "resourcelimitexceeded",
    "unable to provision requested ml compute capacity",
)
#: ... that mean the job was interrupted: spot capacity reclaimed, MaxWait reached waiting for spot.
INTERRUPTION_MARKERS = (
    "spot interruption",
    "spot instance",
    "interrupted",
    "maxwaittimeexceeded",
    "reclaimed",
)

#: The IAM permission each API call needs (named in AwsPermissionError messages).
IAM_ACTIONS = {
    "CreateTrainingJob": "sagemaker:CreateTrainingJob",
    "DescribeTrainingJob": "sagemaker:DescribeTrainingJob",
    "StopTrainingJob": "sagemaker:StopTrainingJob",
    "ListTrainingJobs": "sagemaker:ListTrainingJobs",
    "CreateProcessingJob": "sagemaker:CreateProcessingJob",
    "DescribeProcessingJob": "sagemaker:DescribeProcessingJob",
    "StopProcessingJob": "sagemaker:StopProcessingJob",
    "ListProcessingJobs": "sagemaker:ListProcessingJobs",
    "AddTags": "sagemaker:AddTags",
    "ListTags": "sagemaker:ListTags",
    "DescribeLogStreams": "logs:DescribeLogStreams",
    "GetLogEvents": "logs:GetLogEvents",
    "PutObject": "s3:PutObject",
}
#: S3 API operation -> the IAM permission it needs.
S3_PERMISSIONS = {
    "ListObjectsV2": "s3:ListBucket",
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CopyObject": "s3:GetObject (source) and s3:PutObject (target)",
    "DeleteObjects": "s3:DeleteObject",
    "GetBucketLocation": "s3:GetBucketLocation",
}


def _error(exc: BaseException) -> Mapping[str, object]:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error")
        if isinstance(error, Mapping):
            return error
    return {}


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` ("" for anything else)."""
    code = _error(exc).get("Code")
    return str(code) if code is not None else ""


def error_message(exc: BaseException) -> str:
    """The AWS error message of a ``ClientError``, or ``str(exc)`` for anything else."""
    if getattr(exc, "response", None) is None:
        return str(exc)
    return str(_error(exc).get("Message", ""))


def http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return status if isinstance(status, int) else None
    return None


def is_throttling(exc: BaseException) -> bool:
    return error_code(exc) in THROTTLING_CODES


def is_access_denied(exc: BaseException) -> bool:
    return error_code(exc) in ACCESS_DENIED_CODES


def is_not_found(exc: BaseException) -> bool:
    """An unknown resource. SageMaker answers ValidationException "Could not find ..." for a job."""
    code, message = error_code(exc), error_message(exc).lower()
    return code in NOT_FOUND_CODES or (
        code == "ValidationException" and ("not found" in message or "could not find" in message)
    )


def is_already_exists(exc: BaseException) -> bool:
    """A create call answered "a resource of this name exists"."""
    return error_code(exc) in ALREADY_EXISTS_CODES or "already exists" in error_message(exc).lower()


def is_capacity_refusal(exc: BaseException) -> bool:
    """A create call refused for want of capacity or an account limit (not a bad request)."""
    return error_code(exc) in CAPACITY_CODES


def _mentions(markers: tuple[str, ...], failure_reason: object, secondary_status: object) -> bool:
    text = " ".join(str(x) for x in (failure_reason, secondary_status) if x).lower()
    return any(marker in text for marker in markers)


def is_capacity_failure(failure_reason: object, secondary_status: object = None) -> bool:
    """A job that ended for want of capacity (``FailureReason``/``SecondaryStatus`` of a Describe*Job)."""
    return _mentions(CAPACITY_MARKERS, failure_reason, secondary_status)


def is_interruption(failure_reason: object, secondary_status: object = None) -> bool:
    """A job that was interrupted (spot reclaim, MaxWaitTimeExceeded) rather than failed."""
    return _mentions(INTERRUPTION_MARKERS, failure_reason, secondary_status)


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: throttling, AWS 5xx, timeouts and connection problems."""
    code = error_code(exc)
    if code:
        if code in TRANSIENT_CODES:
            return True
        status = http_status(exc)
        return status is not None and status >= 500
    if isinstance(exc, (TimeoutError, ConnectionError, OSError)):
        return True
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError, NoCredentialsError

    # NoCredentialsError is transient in a triggerer: instance-profile credentials can lag.
    if isinstance(exc, (BotoConnectionError, HTTPClientError, NoCredentialsError)):
        return True
    import aiohttp  # a dependency of aiobotocore (the triggers' clients)

    return isinstance(exc, aiohttp.ClientError)


def permission_error(
    exc: BaseException, *, operation: str, resource: str, conn_id: str | None
) -> AwsPermissionError:
    """AccessDenied -> a message naming the action, the resource and the IAM permission to grant."""
    message = error_message(exc)
    action = IAM_ACTIONS.get(operation, operation)
    m_action = re.search(r"perform:\s*([\w\-]+:[\w\-*]+)", message)
    m_resource = re.search(r"on resource:\s*(\S+)", message)
    missing = m_action.group(1) if m_action else action
    where = m_resource.group(1) if m_resource else resource
    return AwsPermissionError(
        f"AWS denied {operation} on {where}: the identity of aws_conn_id={conn_id!r} needs the IAM "
        f"permission {missing} on {where}"
        + (
            " (CreateTrainingJob also needs iam:PassRole on the job's RoleArn)"
            if operation == "CreateTrainingJob"
            else ""
        )
        + f". AWS said: {message}"
    )


def service_permission_error(
    exc: BaseException, *, service: str, operation: str, conn_id: str | None
) -> AwsPermissionError:
    """AccessDenied on a boto3 ``snake_case`` call of ``service`` (e.g. ``fsx``, ``describe_file_systems``)."""
    action = "".join(p.capitalize() for p in operation.split("_"))
    return AwsPermissionError(
        f"AWS denied {service}:{action}; grant it to the role of connection {conn_id!r} ({exc})"
    )


def s3_permission_error(
    exc: BaseException, *, operation: str, uri: str, conn_id: str | None
) -> AwsPermissionError:
    """AccessDenied on an S3 call for ``uri``: names the permission and the bucket ARN."""
    del exc  # the bucket and permission say it all; AWS's S3 message adds nothing
    scheme, bucket, _ = split_uri(uri)
    bucket = bucket if scheme == "s3" else uri
    return AwsPermissionError(
        f"{uri}: access denied ({operation}); grant {S3_PERMISSIONS.get(operation, operation)} "
        f"on arn:aws:s3:::{bucket} (and its keys) to the role of connection {conn_id!r}"
    )


def describe_error(exc: BaseException) -> str:
    """``Code: Message`` of an AWS error, or ``Type: text`` of anything else (for user-facing messages)."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping) and "Error" in response:
        err = response["Error"]
        return f"{err.get('Code', 'Error')}: {err.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"
