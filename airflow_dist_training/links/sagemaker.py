"""Extra links of training tasks: SageMaker console job page, CloudWatch logs, S3 output and checkpoints
(on the local backend: the Training view and the job's ``file://`` artifacts). Nothing here talks to AWS.

Why ``get_link`` reads the operator first: the worker calls it in ``finalize`` on the very operator
that ran, where ``persist`` stored the job's info. Reading XCom instead would log an "XCom not
found" *error* for every task that failed before the job was known; XCom is read only by an
operator resumed after a deferral.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

from airflow_dist_training.storage.location import split_uri, uri_scheme

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator, Context
    from airflow.sdk.types import TaskInstanceKey

XCOM_KEY = "sagemaker_training_job"
#: Attribute of the operator holding the persisted info in the process that ran it.
OPERATOR_ATTR = "_adt_training_links"
CONSOLE = "https://{region}.console.aws.amazon.com"


def s3_console_url(uri: str | None, region: str) -> str:
    """``s3://bucket/prefix`` -> the S3 console page of that prefix (empty for other schemes)."""
    if not uri or uri_scheme(uri) != "s3":
        return ""
    _, bucket, key = split_uri(uri)
    if key and not key.endswith("/"):
        key += "/"
    return f"https://s3.console.aws.amazon.com/s3/buckets/{bucket}?region={region}&prefix={quote(key)}"


def _file_url(uri: str | None) -> str:
    if uri and uri.startswith("/"):
        return "file://" + quote(uri)
    return uri if uri and uri.startswith("file://") else s3_console_url(uri, "us-east-1")


def job_links(info: dict[str, Any]) -> dict[str, str]:
    """Every link of a job from its persisted info."""
    view = info.get("view_url") or ""
    from airflow_dist_training.spec.backends import runs_on_aws

    if runs_on_aws(info.get("backend") or "sagemaker") is False:  # a job on this machine: its files
        return {
            "job": view,
            "logs": view,  # metric log and status timeline; the host output is in the task log
            "output": _file_url(info.get("output_uri")),
            "checkpoints": _file_url(info.get("checkpoint_uri")),
            "view": view,
        }
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
        "view": view,
    }


class _TrainingLink(BaseOperatorLink):
    name: ClassVar[str]
    which: ClassVar[str]  # the key of ``job_links``

    def __init_subclass__(cls, name: str = "", which: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = name
        cls.which = which

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        info = getattr(operator, OPERATOR_ATTR, None)
        if info is None and getattr(operator, "_job_name", None):  # resumed after a deferral
            from airflow.sdk.execution_time.xcom import XCom

            try:
                info = XCom.get_value(key=XCOM_KEY, ti_key=ti_key)
            except Exception:
                return ""
        return job_links(info)[self.which] if isinstance(info, dict) else ""


class SageMakerTrainingJobLink(_TrainingLink, name="SageMaker Training Job", which="job"):
    """The SageMaker console page of the training job."""


class SageMakerTrainingLogsLink(_TrainingLink, name="CloudWatch Logs", which="logs"):
    """The job's CloudWatch log streams (one per host)."""


class SageMakerTrainingOutputLink(_TrainingLink, name="S3 Output", which="output"):
    """The S3 output location (model.tar.gz)."""


class SageMakerTrainingCheckpointLink(_TrainingLink, name="S3 Checkpoints", which="checkpoints"):
    """The S3 checkpoint location."""


class TrainingViewLink(_TrainingLink, name="Training view", which="view"):
    """The Training view of the run (live curves, checkpoints, gate, version), both backends."""


ALL_LINKS = (
    TrainingViewLink(),
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
    backend: str = "sagemaker",
    job_dir: str | None = None,
) -> None:
    """Store what the links need (called by the operator/sensor once the job is known).

    The Training view reads the same record to find a run's jobs (``backend``, ``job_dir`` of a
    local job, whose metric log it plots while the job runs).
    """
    from airflow_dist_training.ui.urls import training_view_url

    ti = context.get("ti")
    if ti is None:
        return
    dag_run = context.get("dag_run")
    value = {
        "region": region,
        "job_name": job_name,
        "output_uri": output_uri,
        "checkpoint_uri": checkpoint_uri,
        "backend": backend,
        "job_dir": job_dir,
        "view_url": training_view_url(
            getattr(dag_run, "dag_id", None) or getattr(ti, "dag_id", None),
            getattr(dag_run, "run_id", None) or getattr(ti, "run_id", None),
        ),
    }
    task = context.get("task")
    if task is not None:
        setattr(task, OPERATOR_ATTR, value)
    ti.xcom_push(key=XCOM_KEY, value=value)
