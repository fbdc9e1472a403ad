"""Extra links of training tasks: SageMaker console job page, CloudWatch logs, S3 output and checkpoints.

Airflow 3 computes links on the worker and stores them in XCom; the operator calls
``TrainingJobLinks.persist(context, ...)`` once it knows the job, and each link formats the same
small dict (region, job name, output and checkpoint URIs). Nothing here talks to AWS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context
    from airflow.sdk.types import TaskInstanceKey

XCOM_KEY = "sagemaker_training_job"
CONSOLE = "https://{region}.console.aws.amazon.com"


def s3_console_url(uri: str | None, region: str) -> str:
    """``s3://bucket/prefix`` -> the S3 console page of that prefix (empty for other schemes)."""
    if not uri or not uri.startswith("s3://"):
        return ""
    bucket, _, key = uri[5:].partition("/")
    if key and not key.endswith("/"):
        key += "/"
    return f"https://s3.console.aws.amazon.com/s3/buckets/{bucket}?region={region}&prefix={quote(key)}"


def job_links(info: dict[str, Any]) -> dict[str, str]:
    """Every link of a job from its persisted info."""
    region = info.get("region") or "us-east-1"
    job = info.get("job_name") or ""
    base = CONSOLE.format(region=region)
    logs_prefix = quote(quote(f"{job}/", safe=""), safe="")  # the console double-encodes the filter
    return {
        "job": f"{base}/sagemaker/home?region={region}#/jobs/{job}" if job else "",
        "logs": (
            f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
            f"$252Faws$252Fsagemaker$252FTrainingJobs$3FlogStreamNameFilter$3D{logs_prefix}"
            if job
            else ""
        ),
        "output": s3_console_url(info.get("output_uri"), region),
        "checkpoints": s3_console_url(info.get("checkpoint_uri"), region),
    }


class _TrainingLink(BaseOperatorLink):
    name: ClassVar[str]
    which: ClassVar[str]

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        try:
            info = XCom.get_value(key=XCOM_KEY, ti_key=ti_key)
        except Exception:
            return ""
        return job_links(info)[self.which] if isinstance(info, dict) else ""


class SageMakerTrainingJobLink(_TrainingLink):
    """The SageMaker console page of the training job."""

    name = "SageMaker Training Job"
    which = "job"


class SageMakerTrainingLogsLink(_TrainingLink):
    """The job's CloudWatch log streams (one per host)."""

    name = "CloudWatch Logs"
    which = "logs"


class SageMakerTrainingOutputLink(_TrainingLink):
    """The S3 output location (model.tar.gz)."""

    name = "S3 Output"
    which = "output"


class SageMakerTrainingCheckpointLink(_TrainingLink):
    """The S3 checkpoint location."""

    name = "S3 Checkpoints"
    which = "checkpoints"


ALL_LINKS = (
    SageMakerTrainingJobLink(),
    SageMakerTrainingLogsLink(),
    SageMakerTrainingOutputLink(),
    SageMakerTrainingCheckpointLink(),
)


def persist(
    context: Context,
    *,
    region: str,
    job_name: str,
    output_uri: str | None = None,
    checkpoint_uri: str | None = None,
) -> None:
    """Store what the links need (called by the operator/sensor once the job is known)."""
    ti = context.get("ti")
    if ti is None:
        return
    ti.xcom_push(
        key=XCOM_KEY,
        value={
            "region": region,
            "job_name": job_name,
            "output_uri": output_uri,
            "checkpoint_uri": checkpoint_uri,
        },
    )
