"""Fixtures for trigger tests: drive SageMaker job state inside moto, seed CloudWatch logs,
count and fault-inject server-side requests, and give moto the StopTrainingJob it lacks."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

ACCOUNT = "123456789012"
REGION = "us-east-1"
LOG_GROUP = "/aws/sagemaker/TrainingJobs"


class MotoSageMaker:
    """Test-side control of the in-process moto server (it runs in this process's threads)."""

    def __init__(self, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.endpoint = endpoint
        self.sm = boto3.client("sagemaker", endpoint_url=endpoint, region_name=REGION)
        self.logs = boto3.client("logs", endpoint_url=endpoint, region_name=REGION)
        self.calls: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()
        self.stop_requests: list[str] = []
        self._throttle: dict[str, Callable[[int], bool]] = {}
        self._lock = threading.Lock()
        self._install(monkeypatch)

    # -- server-side instrumentation ---------------------------------------------------------------
    def _install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from moto.core.exceptions import JsonRESTError
        from moto.core.responses import BaseResponse
        from moto.sagemaker.responses import SageMakerResponse

        original = BaseResponse.call_action
        control = self

        def call_action(resp: Any) -> Any:
            action = resp._get_action()
            with control._lock:
                control.calls[action] += 1
                n = control.calls[action]
                rule = control._throttle.get(action)
                throttle = rule is not None and rule(n)
                if throttle:
                    control.throttled[action] += 1
            if throttle:
                err = JsonRESTError("ThrottlingException", "Rate exceeded")
                return (
                    err.code,
                    {"status": err.code, "Content-Type": "application/x-amz-json-1.1"},
                    err.description,
                )
            return original(resp)

        def stop_training_job(resp: Any) -> str:
            name = resp._get_param("TrainingJobName")
            control.stop_requests.append(name)
            job = control.backend.training_jobs.get(name)
            if job is None:
                raise JsonRESTError("ValidationException", f"Requested resource not found: {name}")
            control.set_state(name, "Stopping", "Stopping")
            return "{}"

        monkeypatch.setattr(BaseResponse, "call_action", call_action)
        monkeypatch.setattr(SageMakerResponse, "stop_training_job", stop_training_job, raising=False)

    def throttle(self, action: str, rule: Callable[[int], bool] = lambda n: n % 2 == 0) -> None:
        """Answer ThrottlingException to the calls of ``action`` for which ``rule(n)`` is true."""
        self._throttle[action] = rule

    # -- job state ----------------------------------------------------------------------------------
    @property
    def backend(self) -> Any:
        from moto.backends import get_backend

        return get_backend("sagemaker")[ACCOUNT][REGION]

    def create_job(self, name: str, instance_count: int = 1) -> None:
        self.sm.create_training_job(
            TrainingJobName=name,
            AlgorithmSpecification={"TrainingImage": "img:latest", "TrainingInputMode": "File"},
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
            OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
            ResourceConfig={
                "InstanceType": "ml.p4d.24xlarge",
                "InstanceCount": instance_count,
                "VolumeSizeInGB": 50,
            },
            StoppingCondition={"MaxRuntimeInSeconds": 86400},
        )
        job = self.backend.training_jobs[name]
        job.training_job_status = "InProgress"
        job.secondary_status = "Starting"
        job.training_end_time = None
        job.final_metric_data_list = None

    def set_state(
        self, name: str, status: str, secondary: str | None = None, failure_reason: str | None = None
    ) -> None:
        from moto.core.utils import utcnow

        job = self.backend.training_jobs[name]
        now = utcnow()
        secondary = secondary or status
        if secondary != job.secondary_status:
            if job.secondary_status_transitions:
                job.secondary_status_transitions[-1]["EndTime"] = now
            job.secondary_status_transitions.append(
                {"Status": secondary, "StartTime": now, "StatusMessage": f"{secondary} phase"}
            )
        job.training_job_status = status
        job.secondary_status = secondary
        if failure_reason is not None:
            job.failure_reason = failure_reason
        if status in {"Completed", "Failed", "Stopped"}:
            job.training_end_time = now
        job.last_modified_time = now

    # -- logs ---------------------------------------------------------------------------------------
    def seed_logs(
        self, job: str, hosts: int, lines_per_host: int, t0_ms: int | None = None
    ) -> list[tuple[int, str]]:
        """Write interleaved log lines for ``hosts`` streams; returns (timestamp, message) sorted."""
        t0 = t0_ms or int(time.time() * 1000) - 60_000
        try:
            self.logs.create_log_group(logGroupName=LOG_GROUP)
        except self.logs.exceptions.ResourceAlreadyExistsException:
            pass
        written: list[tuple[int, str]] = []
        for h in range(hosts):
            stream = f"{job}/algo-{h + 1}-1700000000"
            self.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
            events = []
            for i in range(lines_per_host):
                ts = t0 + i * 1000 + h  # host h's i-th line: interleaves across hosts
                msg = f"host{h + 1} step {i}"
                events.append({"timestamp": ts, "message": msg})
                written.append((ts, msg))
            self.logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)
        return sorted(written)


@pytest.fixture
def moto_sm(moto_reset: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoSageMaker]:
    yield MotoSageMaker(moto_reset, monkeypatch)
