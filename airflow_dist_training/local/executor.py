"""Execute a SageMaker ``CreateTrainingJob`` request on this machine: the local backend's engine.

The request is the SageMaker planner's, unchanged: its hyperparameters, channels, environment and
distribution flags are what the simulated hosts see. No Airflow import, thread-safe. This module is
the facade of the modules docs/local-backend.md lists, with the public API and the differences.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from airflow_dist_training.local.job import LocalTrainingJob
from airflow_dist_training.local.request_plan import JobOptions, LocalRequestError, RequestPlan, plan_request
from airflow_dist_training.local.store import RequestStore

__all__ = ["JobOptions", "LocalExecutor", "LocalRequestError", "LocalTrainingJob", "RequestPlan"]

LogFn = Callable[[str], None]


class LocalExecutor:
    """Runs ``CreateTrainingJob`` requests on this machine; one handle per job name (thread-safe).

    :param jobs_root: where each job's folder (``<jobs_root>/<job name>``) is created.
    :param store: where the request's ``s3://`` URIs live (default: ``<jobs_root>/_buckets``).
    :param options: default :class:`JobOptions` of the jobs started.
    """

    def __init__(
        self, jobs_root: str | Path, store: RequestStore | None = None, options: JobOptions | None = None
    ) -> None:
        self.jobs_root = Path(jobs_root).absolute()
        self.store = store or RequestStore(self.jobs_root / "_buckets")
        self.options = options or JobOptions()
        self._jobs: dict[str, LocalTrainingJob] = {}
        self._lock = threading.Lock()

    def plan(
        self,
        request: Mapping[str, Any],
        *,
        store: RequestStore | None = None,
        options: JobOptions | None = None,
    ) -> RequestPlan:
        """Check a request without running it (raises :class:`LocalRequestError`)."""
        return plan_request(request, self.jobs_root, store or self.store, options or self.options)

    def start(
        self,
        request: Mapping[str, Any],
        *,
        store: RequestStore | None = None,
        options: JobOptions | None = None,
        log: LogFn | None = None,
    ) -> LocalTrainingJob:
        """Start a job from a ``CreateTrainingJob`` request; returns at once with its handle.

        Raises :class:`LocalRequestError` (nothing launched) when the request cannot run here, and
        ``ValueError`` when a job of that name is still running in this executor.
        """
        store = store or self.store
        rp = plan_request(request, self.jobs_root, store, options or self.options)
        with self._lock:
            current = self._jobs.get(rp.plan.job_name)
            if current is not None and not current.done:
                raise ValueError(f"training job {rp.plan.job_name} is already running")
            job = LocalTrainingJob(rp, store, options or self.options, log)
            self._jobs[job.name] = job
        job._thread.start()
        return job

    def get(self, name: str) -> LocalTrainingJob | None:
        with self._lock:
            return self._jobs.get(name)
