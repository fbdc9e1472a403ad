"""``SageMakerTrainingHook``: every SageMaker training API call the project makes, in one place.

An ``AwsBaseHook`` subclass assembled on first access (module ``__getattr__``), so importing this
module imports neither boto3 nor the Amazon provider. Over the provider's ``SageMakerHook`` it
translates errors into what the user can do (``aws_errors``), retries throttling past botocore,
stops idempotently with a ``stop-requested`` tag (a stop on request is told apart from one in the
console), merges all hosts' CloudWatch logs and builds the JSON ``TrainingResult``. It has no
async API: triggers poll through the shared poller (``triggers/polling.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_dist_training.aws_errors import is_capacity_failure
from airflow_dist_training.errors import CapacityError, TrainingJobError, training_job_error
from airflow_dist_training.hooks.aws import cached_aws_hook
from airflow_dist_training.hooks.sagemaker_jobs import (
    TAG_STOP_CAUSE,
    TAG_STOP_REQUESTED,
    DurableJob,
    SageMakerApi,
)
from airflow_dist_training.job_states import STOPPED_STATES, JobPhase, JobStatus
from airflow_dist_training.results import StatusTransition, TrainingResult
from airflow_dist_training.sagemaker import log_tail as _logs
from airflow_dist_training.sagemaker.job_kinds import TRAINING
from airflow_dist_training.sagemaker.log_tail import LogCursor, LogEvent
from airflow_dist_training.source_archive import pack_source_dir
from airflow_dist_training.storage.location import split_uri

if TYPE_CHECKING:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    from airflow_dist_training.sagemaker.uploads import Upload

LOG_GROUP = str(TRAINING.log_group)


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat()
    return str(value)


def timeline_from_description(description: Mapping[str, Any]) -> list[StatusTransition]:
    """SecondaryStatusTransitions as JSON (ISO 8601 UTC strings)."""
    return [
        StatusTransition(
            status=str(t.get("Status", "")),
            start=_iso(t.get("StartTime")) or "",
            end=_iso(t.get("EndTime")),
            message=str(t.get("StatusMessage", "")),
        )
        for t in description.get("SecondaryStatusTransitions") or []
    ]


def final_metrics(description: Mapping[str, Any]) -> dict[str, float]:
    """FinalMetricDataList as ``{metric name: value}``."""
    return {
        str(m["MetricName"]): float(m["Value"])
        for m in description.get("FinalMetricDataList") or []
        if "MetricName" in m and "Value" in m
    }


def billable_seconds(description: Mapping[str, Any]) -> int | None:
    """BillableTimeInSeconds when SageMaker reports it, else (end - start) x instances."""
    if description.get("BillableTimeInSeconds") is not None:
        return int(description["BillableTimeInSeconds"])
    start, end = description.get("TrainingStartTime"), description.get("TrainingEndTime")
    if isinstance(start, datetime) and isinstance(end, datetime):
        resources = description.get("ResourceConfig") or {}
        groups = resources.get("InstanceGroups") or [{"InstanceCount": resources.get("InstanceCount") or 1}]
        count = sum(int(g.get("InstanceCount", 0)) for g in groups)
        return max(0, int((end - start).total_seconds())) * count
    return None


def result_from_description(description: Mapping[str, Any]) -> TrainingResult:
    """The XCom result of a training job: small JSON, no datetimes, no credentials."""
    training_seconds = description.get("TrainingTimeInSeconds")
    return TrainingResult(
        backend="sagemaker",
        job_name=str(description["TrainingJobName"]),
        job_arn=str(description.get("TrainingJobArn", "")),
        status=str(description.get("TrainingJobStatus", "")),
        model_artifact_uri=(description.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        output_uri=(description.get("OutputDataConfig") or {}).get("S3OutputPath"),
        checkpoint_uri=(description.get("CheckpointConfig") or {}).get("S3Uri"),
        final_metrics=final_metrics(description),
        billable_seconds=billable_seconds(description),
        training_seconds=int(training_seconds) if training_seconds is not None else None,
        timeline=timeline_from_description(description),
    )


_PHASES = {
    "InProgress": JobPhase.RUNNING,
    "Stopping": JobPhase.STOPPING,
    "Completed": JobPhase.COMPLETED,
    "Failed": JobPhase.FAILED,
    "MaxRuntimeExceeded": JobPhase.FAILED,
    "Stopped": JobPhase.STOPPED,
}


def job_status_from_description(
    description: Mapping[str, Any], *, stop_tags: Callable[[], Mapping[str, str]] = dict
) -> JobStatus:
    """The ``JobStatus`` of a ``DescribeTrainingJob`` response: the one place its fields become a
    status. ``stop_tags`` reads the job's tags, only for a stopped job (who asked for the stop)."""
    from airflow_dist_training.checkpoints.resume import classify_outcome

    state = str(description.get("TrainingJobStatus", ""))
    reason, secondary = description.get("FailureReason"), description.get("SecondaryStatus")
    phase = _PHASES.get(state, JobPhase.PENDING)
    if phase is JobPhase.RUNNING and secondary in ("Starting", "Pending"):
        phase = JobPhase.PENDING
    tags = stop_tags() if phase is JobPhase.STOPPED else {}
    return JobStatus(
        name=str(description.get("TrainingJobName", "?")),
        phase=phase,
        state=state,
        outcome=None
        if phase in (JobPhase.PENDING, JobPhase.RUNNING, JobPhase.STOPPING)
        else classify_outcome(state, reason, secondary),
        reason=str(reason) if reason else None,
        stop_requested=tags.get(TAG_STOP_REQUESTED) == "true",
        stop_cause=tags.get(TAG_STOP_CAUSE),
        spot=bool(description.get("EnableManagedSpotTraining")),
        detail=dict(description),
    )


def error_for_terminal_state(
    description: Mapping[str, Any], *, stop_requested: bool = False
) -> TrainingJobError:
    """The exception to raise for a job that ended without success (never call it for Completed)."""
    name = str(description.get("TrainingJobName", "?"))
    status = str(description.get("TrainingJobStatus", "?"))
    reason = description.get("FailureReason")
    secondary = description.get("SecondaryStatus")
    if status in STOPPED_STATES and stop_requested:
        return TrainingJobError(
            f"Training job {name} was stopped on request (task killed, cleared or marked); it did not complete.",
            job_name=name,
            status=status,
            failure_reason=None,
        )
    if is_capacity_failure(reason, secondary):  # aws_errors.py: the one capacity classification
        return CapacityError(
            f"Training job {name} could not get capacity ({status}, {secondary}): {reason}. "
            "This is not a bug in the job: retry later, or use another instance type or region.",
            job_name=name,
            status=status,
            failure_reason=reason,
        )
    detail = f": {reason}" if reason else ""
    if secondary == "MaxWaitTimeExceeded":
        detail += (
            " (managed spot: capacity was reclaimed and the job did not finish within MaxWaitTimeInSeconds)"
        )
    elif status in STOPPED_STATES:
        detail = detail or " (stopped outside Airflow, e.g. in the console or by StopTrainingJob)"
    return training_job_error(
        f"Training job {name} ended {status}{detail}", job_name=name, status=status, failure_reason=reason
    )


def _fault_point(name: str) -> None:
    """Crash-injection point for the fault-injection tests and bench/crash_retry.py.

    When ``ADT_CRASH_AT`` equals ``name`` the process dies at once (``os._exit``), like a worker
    killed by the OOM killer or a node loss. With ``ADT_CRASH_KILL_PGID`` it first SIGKILLs that
    process group: a Celery worker with its pool and task supervisors, as when its machine is lost
    (the task process runs in a group of its own). Costs one environment lookup otherwise.
    """
    if os.environ.get("ADT_CRASH_AT") == name:
        if group := os.environ.get("ADT_CRASH_KILL_PGID"):
            import signal

            os.killpg(int(group), signal.SIGKILL)
        os._exit(int(os.environ.get("ADT_CRASH_EXIT_CODE", "137")))


class _TrainingHookMethods(SageMakerApi):
    """SageMaker training API with throttling-aware retries, error translation and merged logs.

    :param aws_conn_id: Airflow AWS connection id (``aws_default``).
    :param region_name: AWS region; default from the connection or the environment.
    :param verify: TLS verification (``AwsBaseHook``).
    :param retry_mode: botocore retry mode, ``adaptive`` (client-side rate limiting) or ``standard``.
    :param max_attempts: botocore total attempts per call (throttles included).
    :param throttle_retries: our own extra retries on ThrottlingException after botocore gives up.
    :param botocore_config: extra botocore ``Config`` kwargs (merged; ``retries`` overrides ours).
    """

    conn_name_attr = "aws_conn_id"
    hook_name = "SageMaker training (airflow-dist-training)"

    # Provided by AwsBaseHook at run time.
    aws_conn_id: str | None
    conn: Any
    log: Any

    def __init__(
        self,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        *,
        verify: bool | str | None = None,
        retry_mode: str = "adaptive",
        max_attempts: int = 10,
        throttle_retries: int = 8,
        botocore_config: dict[str, Any] | None = None,
    ) -> None:
        from botocore.config import Config

        if retry_mode not in {"adaptive", "standard", "legacy"}:
            raise ValueError("retry_mode must be 'adaptive', 'standard' or 'legacy'")
        retries = {"mode": retry_mode, "total_max_attempts": max_attempts}
        self.throttle_retries = throttle_retries
        super().__init__(  # type: ignore[call-arg]  # AwsBaseHook, next in the assembled class's MRO
            aws_conn_id=aws_conn_id,
            region_name=region_name,
            verify=verify,
            client_type="sagemaker",
            config=Config(**{"retries": retries, **(botocore_config or {})}),
        )

    def _sibling(self, client_type: str) -> AwsBaseHook:
        """A hook of another AWS service with this hook's connection, region and botocore config."""
        return cached_aws_hook(
            self,
            client_type,
            aws_conn_id=self.aws_conn_id,
            region_name=self._region_name,  # type: ignore[attr-defined]
            verify=self._verify,  # type: ignore[attr-defined]
            config=self._config,  # type: ignore[attr-defined]
        )

    @property
    def logs_conn(self) -> Any:
        return self._sibling("logs").conn

    @property
    def s3_conn(self) -> Any:
        return self._sibling("s3").conn

    @property
    def sagemaker_client(self) -> Any:
        return self.conn

    @cached_property
    def jobs(self) -> DurableJob:
        return DurableJob(self, TRAINING)

    def describe_training_job_or_none(self, job_name: str) -> dict[str, Any] | None:
        """The description, or None when no job has this name."""
        return self.jobs.describe_or_none(job_name)

    def stop_training_job(self, job_name: str, *, reason: str = "airflow") -> bool:
        """Stop the job; idempotent; tags it ``stop-requested`` first. True if a stop was sent."""
        return self.jobs.stop(job_name, reason=reason)

    def report_progress(
        self, job_name: str, log: Callable[[str], None], *, stream_logs: bool = True
    ) -> Callable[[Mapping[str, Any]], None]:
        """What a wait does with each description it reads: log the job's new status transitions
        and (``stream_logs``) its hosts' new CloudWatch lines."""
        cursor = LogCursor()
        seen_transitions = 0

        def report(desc: Mapping[str, Any]) -> None:
            nonlocal seen_transitions
            transitions = desc.get("SecondaryStatusTransitions") or []
            for t in transitions[seen_transitions:]:
                log(
                    f"{job_name}: {t.get('Status')} since {_iso(t.get('StartTime'))}: {t.get('StatusMessage', '')}"
                )
            seen_transitions = len(transitions)
            if stream_logs:
                for event in self.fetch_log_events(job_name, cursor):
                    log(event.format())

        return report

    def fetch_log_events(self, job_name: str, cursor: LogCursor | None = None) -> list[LogEvent]:
        """New events of every stream since ``cursor`` (updated in place), merged by timestamp.

        The streams are listed again on every call (a new host's stream is never missed)."""
        tail = _logs.LogTail(job_name, LOG_GROUP, cursor=cursor, rediscover_every=1)
        return _logs.tail_sync(
            tail.fetch(),
            lambda operation, resource, kwargs: self._call(self.logs_conn, operation, resource, **kwargs),
        )

    def put_uploads(self, uploads: Iterable[Upload]) -> None:
        """Put what the planner says must be in S3 before ``CreateTrainingJob`` (code, launcher files)."""
        for upload in uploads:
            if upload.content is not None:
                self._put_object(upload.content, upload.s3_uri, upload.kms_key)
            elif upload.local_path:
                self.upload_code(
                    upload.local_path, upload.s3_uri, kms_key=upload.kms_key, dependencies=upload.dependencies
                )

    def upload_code(
        self,
        local_path: str | os.PathLike[str],
        s3_uri: str,
        *,
        kms_key: str | None = None,
        dependencies: Sequence[str] = (),
    ) -> None:
        """Upload training code: a directory is packed as ``sourcedir.tar.gz`` (with its
        ``dependencies``); a file is put as is."""
        path = Path(local_path)
        body = pack_source_dir(path, dependencies) if path.is_dir() else path.read_bytes()
        self._put_object(body, s3_uri, kms_key)
        self.log.info("Uploaded %s to %s (%d bytes)", path, s3_uri, len(body))

    def _put_object(self, body: bytes, s3_uri: str, kms_key: str | None) -> None:
        _, bucket, key = split_uri(s3_uri)
        extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key} if kms_key else {}
        self._call(self.s3_conn, "PutObject", s3_uri, Bucket=bucket, Key=key, Body=body, **extra)


def _build_hook_class() -> type:
    from airflow_dist_training.hooks.aws import aws_base_hook_class

    return type(
        "SageMakerTrainingHook",
        (_TrainingHookMethods, aws_base_hook_class()),
        {"__module__": __name__, "__doc__": _TrainingHookMethods.__doc__},
    )


if TYPE_CHECKING:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook as _AwsBaseHook

    class SageMakerTrainingHook(_TrainingHookMethods, _AwsBaseHook): ...


def __getattr__(name: str) -> Any:
    if name == "SageMakerTrainingHook":  # built once: from then on a module global
        globals()[name] = hook_class = _build_hook_class()
        return hook_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
