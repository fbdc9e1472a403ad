"""A durable toy backend for the crash/retry tests: its jobs outlive the process that created them.

It implements the backend protocol (``planning.TrainingBackend``) alone, subclassing nothing of the
project, over a "service" that is a directory (``TOY_SERVICE_DIR``) shared by every process of a
test: one file per job, found again by name from any process, and a ledger that records every
create, so a duplicate create of a run is counted even if it reused the name. A job runs for
``JOB_SECONDS`` after its create, then completes.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.hooks.sagemaker_jobs import JobRef
from airflow_dist_training.job_states import AttemptOutcome, JobPhase, JobStatus
from airflow_dist_training.spec.backends import BackendRecord, register_backend

JOB_SECONDS = 1.0  # long enough that a crash right after the create finds the job still running
log = logging.getLogger(__name__)


def service_dir() -> Path:
    return Path(os.environ["TOY_SERVICE_DIR"])


def creates() -> list[str]:
    """Every job name the service was asked to create, in order (a name twice is a duplicate)."""
    ledger = service_dir() / "creates.log"
    return ledger.read_text().split() if ledger.exists() else []


class DurableToyBackend:
    """Jobs on the toy service, reported as ``JobStatus``; the task reattaches to them by name."""

    def __init__(self, hook_kwargs: dict[str, Any] | None = None, *, record: BackendRecord, **_: Any) -> None:
        self.record = record

    def _job_file(self, name: str) -> Path:
        return service_dir() / "jobs" / f"{name}.json"

    def plan(
        self, spec: Any, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]:
        return {"request": None, "warnings": [], "summary": f"toy job {job_name}", "cost_bound_usd": 0.0}

    def region(self) -> str:
        return "toy"

    def status(self, job_name: str) -> JobStatus | None:
        path = self._job_file(job_name)
        if not path.exists():
            return None
        job = json.loads(path.read_text())
        if time.time() < job["created_at"] + JOB_SECONDS:
            return JobStatus(job_name, JobPhase.RUNNING, "busy")
        return JobStatus(job_name, JobPhase.COMPLETED, "done", AttemptOutcome.SUCCEEDED)

    def find_or_create(
        self,
        names: Iterable[str],
        request_for: Callable[..., Any],
        *,
        exhausted: Callable[[], Exception],
        on_ended: Callable[[JobStatus, int], None] | None = None,
    ) -> JobRef:
        """Describe before create: the run's first name that has no job, or its live/completed job."""
        ended: list[JobStatus] = []
        for generation, name in enumerate(names, start=1):
            status = self.status(name)
            if status is None:
                request_for(name, tuple(ended))
                self._create(name)
                return JobRef(name, None)
            if status.active or status.phase is JobPhase.COMPLETED:
                log.info("toy: found this run's job %s (%s)", name, status.state)
                return JobRef(name, {"status": status.state})
            ended.append(status)
            if on_ended is not None:
                on_ended(status, generation + 1)
        raise exhausted()

    def _create(self, name: str) -> None:
        path = self._job_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with (service_dir() / "creates.log").open("a") as ledger:
            ledger.write(name + "\n")
        path.write_text(json.dumps({"created_at": time.time()}))
        log.info("toy: created job %s", name)

    def preflight(self, spec: Any, *, log: Callable[..., None]) -> None:
        return None

    def trigger(self, job_name: str, **settings: Any) -> None:
        return None  # no triggerer of its own: the task polls

    def wait(self, job_name: str, *, poll_interval: float = 0.05, **_: Any) -> JobStatus:
        while (status := self.status(job_name)) is not None and status.active:
            time.sleep(poll_interval)
        if status is None:
            raise TrainingJobError(f"toy job {job_name} vanished", job_name=job_name, status="Unknown")
        return status

    def result_of(self, status: JobStatus) -> Any:
        if status.phase is not JobPhase.COMPLETED:
            raise TrainingJobError(
                f"toy job {status.name} ended {status.state}", job_name=status.name, status=status.state
            )
        return {
            "backend": self.record.name,
            "job_name": status.name,
            "job_arn": f"toy://{status.name}",
            "status": "Completed",
            "model_artifact_uri": None,
            "output_uri": None,
            "checkpoint_uri": None,
            "final_metrics": {},
            "billable_seconds": None,
            "training_seconds": None,
            "timeline": [],
        }

    def links(self, status: JobStatus) -> dict[str, Any]:
        return {"region": self.region(), "job_name": status.name, "backend": self.record.name}

    def stop(self, job_name: str, *, reason: str = "airflow", cause: str | None = None) -> bool:
        return False  # its jobs end on their own

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        return []

    def checkpoint_location(self, spec: Any, uri: str) -> str:
        return uri


TOY_DURABLE = BackendRecord(
    name="toy_durable",
    factory=DurableToyBackend,
    staging="directory",
    evaluation="process",
    default_registry="local",
    durable=True,
    on_aws=False,
    description="a test's durable backend: jobs are files of a directory shared by its processes",
)


def register() -> None:
    """Register the toy (again, when the DAG file that uses it is parsed again: it replaces itself)."""
    register_backend(TOY_DURABLE)
