"""SageMaker's listing calls as AWS answers them, over moto's training job records.

moto pages ``ListTrainingJobs`` before it filters (a filtered page can come back short or empty
while more jobs match), ignores ``SortBy``/``SortOrder`` and matches ``NameContains`` case-sensitively;
its ``Search`` answers a training job with moto's internal attribute names. These handlers filter,
sort, then page, as SageMaker does, and answer ``Search`` with the ``DescribeTrainingJob`` record.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

_SORT_KEYS = {
    "Name": lambda j: j.training_job_name,
    "CreationTime": lambda j: j.creation_time,
    "Status": lambda j: j.training_job_status,
}


def _naive(value: Any) -> dt.datetime | None:
    """A request time (epoch seconds or datetime) as moto keeps times: naive UTC."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, dt.UTC).replace(tzinfo=None)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value  # type: ignore[no-any-return]


def matching_training_jobs(jobs: list[Any], request: dict[str, Any]) -> list[Any]:
    """The jobs ListTrainingJobs' filters keep, in the requested order (before paging)."""
    name = str(request.get("NameContains") or "").lower()
    status = request.get("StatusEquals")
    bounds = [
        (_naive(request.get(k)), attr, after)
        for k, attr, after in (
            ("CreationTimeAfter", "creation_time", True),
            ("CreationTimeBefore", "creation_time", False),
            ("LastModifiedTimeAfter", "last_modified_time", True),
            ("LastModifiedTimeBefore", "last_modified_time", False),
        )
    ]

    def keep(job: Any) -> bool:
        if name and name not in job.training_job_name.lower():
            return False
        if status and job.training_job_status != status:
            return False
        for bound, attr, after in bounds:
            if bound is not None and not (
                getattr(job, attr) > bound if after else getattr(job, attr) < bound
            ):
                return False
        return True

    key = _SORT_KEYS.get(str(request.get("SortBy") or "CreationTime"), _SORT_KEYS["CreationTime"])
    return sorted(filter(keep, jobs), key=key, reverse=request.get("SortOrder", "Ascending") == "Descending")


def _page(items: list[Any], request: dict[str, Any], limit: int = 100) -> tuple[list[Any], str | None]:
    start = int(request.get("NextToken") or 0)
    size = int(request.get("MaxResults") or limit)
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


def list_training_jobs(self: Any) -> Any:
    """ListTrainingJobs: filter, sort, then page."""
    from moto.core.responses import ActionResult
    from moto.sagemaker.exceptions import ValidationError

    request = json.loads(self.body or "{}")
    if request.get("NextToken") and not str(request["NextToken"]).isdigit():
        raise ValidationError("Invalid pagination token")
    jobs = matching_training_jobs(list(self.sagemaker_backend.training_jobs.values()), request)
    page, token = _page(jobs, request)
    summaries = [
        {
            k: v
            for k, v in {
                "TrainingJobName": j.training_job_name,
                "TrainingJobArn": j.arn,
                "CreationTime": j.creation_time,
                "TrainingEndTime": j.training_end_time,
                "LastModifiedTime": j.last_modified_time,
                "TrainingJobStatus": j.training_job_status,
                "SecondaryStatus": j.secondary_status,
            }.items()
            if v is not None
        }
        for j in page
    ]
    return ActionResult({"TrainingJobSummaries": summaries, **({"NextToken": token} if token else {})})


def search(original: Any) -> Any:
    """Search: moto's matching; a training job answered as DescribeTrainingJob answers it, paged."""

    def handler(self: Any) -> Any:
        from moto.core.responses import ActionResult

        request = json.loads(self.body or "{}")
        if request.get("Resource") != "TrainingJob":
            return original(self)
        found = self.sagemaker_backend.search(
            resource="TrainingJob", search_expression=request.get("SearchExpression")
        )
        records = self.sagemaker_backend.training_jobs
        jobs = [records[r["TrainingJob"]["TrainingJobName"]] for r in found["Results"]]
        sort_by = str(request.get("SortBy") or "CreationTime")
        attr = {"TrainingJobName": "training_job_name", "TrainingJobStatus": "training_job_status"}.get(
            sort_by, "creation_time"
        )
        jobs.sort(
            key=lambda j: getattr(j, attr), reverse=request.get("SortOrder", "Descending") == "Descending"
        )
        page, token = _page(jobs, request)
        results = [{"TrainingJob": j.response_object} for j in page]
        return ActionResult({"Results": results, **({"NextToken": token} if token else {})})

    return handler


def update_model_package(original: Any) -> Any:
    """UpdateModelPackage as SageMaker does it: what the request does not send stays (moto clears
    the approval status and description, and replaces the metadata map instead of merging it)."""

    def handler(self: Any) -> Any:
        request = json.loads(self.body or "{}")
        backend = self.sagemaker_backend
        arn = str(request.get("ModelPackageArn") or "")
        package = backend.model_packages.get(backend.model_package_name_mapping.get(arn, arn))
        before = None
        if package is not None:
            before = (
                package.model_approval_status,
                package.approval_description,
                dict(package.customer_metadata_properties or {}),
            )
        answer = original(self)
        if package is not None and before is not None:
            status, description, metadata = before
            if "ModelApprovalStatus" not in request:
                package.model_approval_status = status
            if "ApprovalDescription" not in request:
                package.approval_description = description
            merged = {**metadata, **(request.get("CustomerMetadataProperties") or {})}
            for key in request.get("CustomerMetadataPropertiesToRemove") or ():
                merged.pop(key, None)
            package.customer_metadata_properties = merged
        return answer

    return handler
