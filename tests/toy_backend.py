"""A durable backend defined only in the tests: the backend protocol alone (``planning.TrainingBackend``),
registered by name, subclassing nothing of the project, and not on AWS.

Its jobs are on a toy "service", a directory (``TOY_SERVICE_DIR``) shared by every process of a test:
one file per job, found again by name from any process (durable), and a ledger of every create, so
a duplicate create of a run is counted even if it reused the name. What a job does:

- by default, it runs its request on this machine's executor, in the process that created it (the
  shipped DAG's training, with its log lines and checkpoints);
- with ``TOY_JOB_SECONDS`` set, it runs no code and completes that many seconds after its create,
  so it outlives the process that created it (the crash/retry tests kill that process).

The service can reclaim the next jobs it creates (``reclaim_next``), as spot capacity is: such a job
does not complete, and the toy reports why. It reports every state in its own terms as a
``JobStatus``: the operator, the task group and the checkpoint watcher read nothing else.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.hooks.sagemaker_jobs import JobRef
from airflow_dist_training.job_states import AttemptOutcome, JobPhase, JobStatus
from airflow_dist_training.spec.backends import BackendRecord, register_backend

log = logging.getLogger(__name__)


def service_dir() -> Path:
    return Path(os.environ["TOY_SERVICE_DIR"])


def job_seconds() -> float | None:
    """How long a job that runs no code lasts; None: jobs run their request on this machine."""
    seconds = os.environ.get("TOY_JOB_SECONDS")
    return None if seconds is None else float(seconds)


def creates() -> list[str]:
    """Every job name the service was asked to create, in order (a name twice is a duplicate)."""
    ledger = service_dir() / "creates.log"
    return ledger.read_text().split() if ledger.exists() else []


def reclaimed() -> set[str]:
    """The jobs whose capacity the service reclaimed."""
    jobs = service_dir() / "jobs"
    return {p.stem for p in jobs.glob("*.json") if json.loads(p.read_text())["reclaimed"]}


def reclaim_next(jobs: int) -> None:
    """The service reclaims the capacity of the next ``jobs`` jobs it creates."""
    service_dir().mkdir(parents=True, exist_ok=True)
    (service_dir() / "reclaim_next").write_text(str(jobs))


def _take_reclaim() -> bool:
    counter = service_dir() / "reclaim_next"
    left = int(counter.read_text()) if counter.exists() else 0
    if left:
        counter.write_text(str(left - 1))
    return left > 0


class ToyBackend:
    """Jobs on the toy service, reported as ``JobStatus``; the task reattaches to them by name."""

    def __init__(self, hook_kwargs: dict[str, Any] | None = None, *, record: BackendRecord, **_: Any) -> None:
        self.record = record
        self.hook_kwargs = dict(hook_kwargs or {})

    @cached_property
    def hook(self) -> Any:
        from airflow_dist_training.hooks.local_training import LocalTrainingHook

        return LocalTrainingHook(**self.hook_kwargs)

    def _job_file(self, name: str) -> Path:
        return service_dir() / "jobs" / f"{name}.json"

    def _running_here(self, name: str) -> Any:
        """The job's handle on this machine's executor, if this process runs it."""
        return None if job_seconds() is not None else self.hook.executor().get(name)

    def plan(
        self, spec: Any, *, job_name: str, region: str, run_identity: str | None = None
    ) -> dict[str, Any]:
        from airflow_dist_training.hooks.backends import get_backend

        # the toy runs the request the local executor runs: planned the same way
        local = get_backend("local", local_hook_kwargs=self.hook_kwargs)
        return local.plan(spec, job_name=job_name, region=region, run_identity=run_identity)

    def region(self) -> str:
        from airflow_dist_training.hooks.aws import local_region

        return local_region()  # the region its requests are planned for, as the plan task planned them

    def _progress(self, name: str, created_at: float) -> tuple[bool, str | None]:
        """(whether the job ended, why it failed: None if it completed)."""
        seconds = job_seconds()
        if seconds is not None:
            return time.time() >= created_at + seconds, None
        job = self._running_here(name)
        if job is None:
            return True, "its processes ended with the process that ran them"
        if not job.done:
            return False, None
        try:
            job.result()
        except TrainingJobError as exc:
            return True, exc.failure_reason or str(exc)
        return True, None

    def status(self, job_name: str) -> JobStatus | None:
        path = self._job_file(job_name)
        if not path.exists():
            return None
        job = json.loads(path.read_text())
        ended, failure = self._progress(job_name, job["created_at"])
        if not ended:
            return JobStatus(job_name, JobPhase.RUNNING, "busy")
        if job["reclaimed"]:
            return JobStatus(
                job_name,
                JobPhase.STOPPED,
                "reclaimed",
                AttemptOutcome.INTERRUPTED,
                "capacity reclaimed",
                spot=True,
            )
        if failure is not None:
            return JobStatus(job_name, JobPhase.FAILED, "broken", AttemptOutcome.FAILED, failure)
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
                self._create(name, request_for(name, tuple(ended)))
                return JobRef(name, None)
            if status.active or status.phase is JobPhase.COMPLETED:
                log.info("toy: found this run's job %s (%s)", name, status.state)
                return JobRef(name, {"status": status.state})
            ended.append(status)
            if on_ended is not None:
                on_ended(status, generation + 1)
        raise exhausted()

    def _create(self, name: str, launch: Any) -> None:
        if job_seconds() is None:
            self.hook.start_job(
                launch.spec,
                name,
                request=launch.request,
                uploads=launch.uploads,
                run_identity=launch.run_identity,
                region=self.region(),
            )
        path = self._job_file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with (service_dir() / "creates.log").open("a") as ledger:
            ledger.write(name + "\n")
        path.write_text(json.dumps({"created_at": time.time(), "reclaimed": _take_reclaim()}))
        log.info("toy: created job %s", name)

    def preflight(self, spec: Any, *, log: Callable[..., None]) -> None:
        return None

    def trigger(self, job_name: str, **settings: Any) -> None:
        return None  # no triggerer of its own: the task waits

    def wait(self, job_name: str, *, poll_interval: float = 0.05, **_: Any) -> JobStatus:
        job = self._running_here(job_name)
        if job is not None:
            job.wait()  # its lines reach the task log as they come (the hook's log)
        while (status := self.status(job_name)) is not None and status.active:
            time.sleep(poll_interval)
        if status is None:
            raise TrainingJobError(f"toy job {job_name} vanished", job_name=job_name, status="Unknown")
        return status

    def result_of(self, status: JobStatus) -> Any:
        if status.phase is not JobPhase.COMPLETED:
            raise TrainingJobError(
                f"toy job {status.name} ended {status.state}: {status.reason}",
                job_name=status.name,
                status=status.state,
                failure_reason=status.reason,
            )
        job = self._running_here(status.name)
        if job is not None:
            return job.result()
        return {  # a job that ran no code: it made nothing
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
        return bool(self._running_here(job_name) and self.hook.stop(job_name))

    def stop_run_jobs(self, run_hash: str, *, reason: str) -> list[str]:
        return [name for name in creates() if run_hash in name and self.stop(name, reason=reason)]

    def checkpoint_location(self, spec: Any, uri: str) -> str:
        from airflow_dist_training.storage.location import uri_scheme

        if job_seconds() is not None or uri_scheme(uri) != "s3":
            return uri  # a job that runs no code reads nothing
        return str(self.hook.object_store(spec).local_uri(uri))  # the job reads this machine's store


TOY = BackendRecord(
    name="toy",
    factory=ToyBackend,
    staging="directory",
    evaluation="process",
    default_registry="local",
    durable=True,
    on_aws=False,
    description="a test's durable backend: jobs on a toy service, files of a directory its processes share",
)


def register() -> None:
    """Register the toy (again, when the DAG file that uses it is parsed again: it replaces itself)."""
    register_backend(TOY)
