"""Closing moto's SageMaker training gaps, in the process that runs ``ThreadedMotoServer``.

moto 5.2 (see ``shared/reference/moto.md``): jobs are ``Completed`` the instant they are created,
``StopTrainingJob`` is not implemented, a duplicate name silently overwrites the first job, no
logs are written. ``FakeTrainingLifecycle.install()`` patches moto's ``SageMakerResponse`` class:

* every ``CreateTrainingJob`` is counted (``creates``) and a duplicate name answers
  ``ResourceInUse`` (as AWS does), so a double creation is caught instead of hidden;
* new jobs start ``InProgress``/``Starting`` (``initial_status``) and complete after
  ``complete_after`` seconds (checked on every describe), going through the real
  SecondaryStatus steps; ``set_status`` drives Failed/Stopped/MaxRuntimeExceeded;
* ``StopTrainingJob`` exists: InProgress -> Stopped (``stops`` counts calls);
* fault injection: ``throttle_every`` (every Nth DescribeTrainingJob answers ThrottlingException),
  ``deny`` (actions answering AccessDeniedException with AWS's message format).

Also used by ``bench/crash_retry.py`` (loaded by path).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from moto.core.utils import utcnow

ACCOUNT = "123456789012"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@dataclass
class FakeTrainingLifecycle:
    initial_status: str = "InProgress"
    complete_after: float | None = 0.0  # seconds after create; None = never on its own
    throttle_every: int = 0
    deny: set[str] = field(default_factory=set)
    creates: Counter[str] = field(default_factory=Counter)
    create_log: list[str] = field(default_factory=list)
    stops: Counter[str] = field(default_factory=Counter)
    describes: int = 0
    lists: int = 0
    throttled: int = 0
    on_create: Any = None  # callable(job name), run in the server thread after a create
    _created_at: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _originals: dict[str, Any] = field(default_factory=dict)

    # --- control -----------------------------------------------------------------------------

    def reset(self) -> None:
        with self._lock:
            self.initial_status = "InProgress"
            self.complete_after = 0.0
            self.throttle_every = 0
            self.deny = set()
            self.creates.clear()
            self.create_log.clear()
            self.stops.clear()
            self.describes = 0
            self.lists = 0
            self.throttled = 0
            self._created_at.clear()
            self.on_create = None

    @property
    def total_creates(self) -> int:
        return sum(self.creates.values())

    @staticmethod
    def backend(region: str = "us-east-1") -> Any:
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[ACCOUNT][region]

    def job(self, name: str, region: str = "us-east-1") -> Any:
        return self.backend(region).training_jobs[name]

    def set_status(
        self,
        name: str,
        status: str,
        *,
        secondary: str | None = None,
        failure_reason: str | None = None,
        region: str = "us-east-1",
    ) -> None:
        job = self.job(name, region)
        now = utcnow()
        job.training_job_status = status
        job.last_modified_time = now
        job.secondary_status = secondary or {
            "InProgress": "Training",
            "Completed": "Completed",
            "Failed": "Failed",
            "Stopped": "Stopped",
            "Stopping": "Stopping",
            "MaxRuntimeExceeded": "MaxRuntimeExceeded",
        }.get(status, status)
        if failure_reason is not None:
            job.failure_reason = failure_reason
        last = job.secondary_status_transitions[-1] if job.secondary_status_transitions else None
        if last is not None and last.get("Status") != job.secondary_status:
            last["EndTime"] = now
            job.secondary_status_transitions.append(
                {"Status": job.secondary_status, "StartTime": now, "StatusMessage": f"{job.secondary_status}"}
            )
        if status in {"Completed", "Failed", "Stopped", "MaxRuntimeExceeded"}:
            job.training_end_time = now
            job.billable_time_in_seconds = 42
            job.training_time_in_seconds = 42
            if status == "Completed":
                job.final_metric_data_list = [{"MetricName": "loss", "Value": 0.125, "Timestamp": now}]

    # --- patches -----------------------------------------------------------------------------

    def install(self) -> None:
        from moto.sagemaker.exceptions import ResourceInUseException, SagemakerClientError, ValidationError
        from moto.sagemaker.responses import SageMakerResponse

        if self._originals:
            return
        fake = self

        class Throttling(SagemakerClientError):
            code = "ThrottlingException"

        class AccessDenied(SagemakerClientError):
            code = "AccessDeniedException"

        def denied(action: str, resource: str) -> AccessDenied:
            return AccessDenied(
                f"User: arn:aws:sts::{ACCOUNT}:assumed-role/airflow-worker/i-0abc is not authorized to perform: "
                f"sagemaker:{action} on resource: {resource} because no identity-based policy allows the "
                f"sagemaker:{action} action"
            )

        orig_create = SageMakerResponse.create_training_job
        orig_describe = SageMakerResponse.describe_training_job
        orig_list = SageMakerResponse.list_training_jobs
        self._originals = {
            "create_training_job": orig_create,
            "describe_training_job": orig_describe,
            "list_training_jobs": orig_list,
        }

        def list_training_jobs(resp: Any) -> Any:
            with fake._lock:
                fake.lists += 1
                for name in list(fake._created_at):
                    fake._advance(resp, name)
            return orig_list(resp)

        def arn(resp: Any, name: str) -> str:
            return f"arn:aws:sagemaker:{resp.region}:{resp.current_account}:training-job/{name}"

        def create_training_job(resp: Any) -> Any:
            name = resp._get_param("TrainingJobName")
            if "CreateTrainingJob" in fake.deny:
                raise denied("CreateTrainingJob", arn(resp, name))
            with fake._lock:
                if name in resp.sagemaker_backend.training_jobs:
                    raise ResourceInUseException(f"Training job {arn(resp, name)} already exists")
                fake.creates[name] += 1
                fake.create_log.append(name)
                result = orig_create(resp)
                job = resp.sagemaker_backend.training_jobs[name]
                if fake.initial_status != "Completed":
                    now = utcnow()
                    job.training_job_status = fake.initial_status
                    job.secondary_status = "Starting"
                    job.training_end_time = None
                    job.final_metric_data_list = []
                    job.secondary_status_transitions = [
                        {"Status": "Starting", "StartTime": now, "StatusMessage": "Preparing the instances"}
                    ]
                    fake._created_at[name] = time.monotonic()
            if fake.on_create is not None:
                fake.on_create(name)
            return result

        def describe_training_job(resp: Any) -> Any:
            name = resp._get_param("TrainingJobName")
            if "DescribeTrainingJob" in fake.deny:
                raise denied("DescribeTrainingJob", arn(resp, name))
            with fake._lock:
                fake.describes += 1
                if fake.throttle_every and fake.describes % fake.throttle_every == 0:
                    fake.throttled += 1
                    raise Throttling("Rate exceeded")
                fake._advance(resp, name)
            return orig_describe(resp)

        def stop_training_job(resp: Any) -> Any:
            from moto.core.responses import EmptyResult

            name = resp._get_param("TrainingJobName")
            if "StopTrainingJob" in fake.deny:
                raise denied("StopTrainingJob", arn(resp, name))
            with fake._lock:
                job = resp.sagemaker_backend.training_jobs.get(name)
                if job is None:
                    raise ValidationError(f"Could not find training job '{arn(resp, name)}'.")
                if job.training_job_status != "InProgress":
                    raise ValidationError(
                        f"The request was rejected because the training job is in status {job.training_job_status}."
                    )
                fake.stops[name] += 1
                fake.set_status(name, "Stopped", region=resp.region)
            return EmptyResult()

        SageMakerResponse.create_training_job = create_training_job  # type: ignore[method-assign]
        SageMakerResponse.describe_training_job = describe_training_job  # type: ignore[method-assign]
        SageMakerResponse.stop_training_job = stop_training_job  # type: ignore[attr-defined]
        SageMakerResponse.list_training_jobs = list_training_jobs  # type: ignore[method-assign]

    def _advance(self, resp: Any, name: str) -> None:
        """Complete an InProgress job once ``complete_after`` seconds have passed (caller holds the lock)."""
        job = resp.sagemaker_backend.training_jobs.get(name)
        created = self._created_at.get(name)
        if (
            job is not None
            and created is not None
            and job.training_job_status == "InProgress"
            and self.complete_after is not None
            and time.monotonic() - created >= self.complete_after
        ):
            for step in ("Downloading", "Training", "Uploading"):
                self.set_status(name, "InProgress", secondary=step, region=resp.region)
            self.set_status(name, "Completed", region=resp.region)

    def uninstall(self) -> None:
        from moto.sagemaker.responses import SageMakerResponse

        for name, fn in self._originals.items():
            setattr(SageMakerResponse, name, fn)
        if hasattr(SageMakerResponse, "stop_training_job"):
            delattr(SageMakerResponse, "stop_training_job")
        self._originals = {}


def seed_logs(
    logs_client: Any, job_name: str, hosts: int, lines_per_host: int, *, start_ms: int | None = None
) -> list[str]:
    """Write ``lines_per_host`` events into ``/aws/sagemaker/TrainingJobs`` for each of ``hosts``
    streams named like SageMaker's (``<job>/algo-<n>-<epoch>``). Timestamps interleave across hosts."""
    group = "/aws/sagemaker/TrainingJobs"
    try:
        logs_client.create_log_group(logGroupName=group)
    except logs_client.exceptions.ResourceAlreadyExistsException:
        pass
    base = start_ms if start_ms is not None else int(time.time() * 1000) - 60_000
    streams = []
    for h in range(1, hosts + 1):
        stream = f"{job_name}/algo-{h}-1712345678"
        logs_client.create_log_stream(logGroupName=group, logStreamName=stream)
        events = [
            {"timestamp": base + i * 1000 + h, "message": f"host {h} line {i}"} for i in range(lines_per_host)
        ]
        if events:
            logs_client.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)
        streams.append(stream)
    return streams


def make_request(name: str, **overrides: Any) -> dict[str, Any]:
    """A hand-built CreateTrainingJob request (what the planner produces)."""
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311",
            "TrainingInputMode": "File",
        },
        "RoleArn": ROLE,
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://data-bucket/train/"}
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://out-bucket/models"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CheckpointConfig": {"S3Uri": "s3://out-bucket/checkpoints/x"},
        "HyperParameters": {"epochs": "3"},
    }
    request.update(overrides)
    return request


def spec_dict(name: str = "llm-finetune", **overrides: Any) -> dict[str, Any]:
    """A spec the planner accepts (2 x ml.p4d.24xlarge, torch_distributed, S3 + FSx channels)."""
    spec: dict[str, Any] = {
        "name": name,
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {"entry_point": "train.py", "source_dir": "s3://my-ml-bucket/code/sourcedir.tar.gz"},
        "role_arn": ROLE,
        "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2, "volume_size_gb": 200},
        "distribution": {"strategy": "torch_distributed"},
        "hyperparameters": {"epochs": 3},
        "environment": {"WANDB_API_KEY": "s3cr3t-wandb-value", "LOG_LEVEL": "info"},
        "channels": {
            "train": {"type": "s3", "uri": "s3://my-ml-bucket/datasets/train/"},
            "extra": {
                "type": "fsx",
                "file_system_id": "fs-0123456789abcdef0",
                "directory_path": "/abcdefgh/data",
            },
        },
        "output": {"s3_path": "s3://my-ml-bucket/output"},
        "checkpoint": {"s3_uri": "s3://my-ml-bucket/checkpoints/llm-finetune"},
        "network": {"subnets": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"]},
    }
    spec.update(overrides)
    return spec


class FakeTaskStateStore:
    """In-memory stand-in for ``context['task_state_store']`` (unit-level operator tests)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def set(self, key: str, value: Any, **_: Any) -> None:
        self.data[key] = value


class FakeTI:
    def __init__(self, run_id: str, map_index: int = -1) -> None:
        self.run_id = run_id
        self.map_index = map_index
        self.xcom: dict[str, Any] = {}
        self.stats_tags: dict[str, str] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value", **_: Any) -> Any:
        """The task's own XComs (what the operator pulls back after a deferral)."""
        return self.xcom.get(key)


def make_context(run_id: str = "manual__1", store: FakeTaskStateStore | None = None) -> dict[str, Any]:
    ti = FakeTI(run_id)
    return {
        "ti": ti,
        "run_id": run_id,
        "task_state_store": store if store is not None else FakeTaskStateStore(),
    }
