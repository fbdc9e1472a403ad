"""Execute a SageMaker ``CreateTrainingJob`` request on this machine: the local backend's engine.

The request is the one the SageMaker planner (``sagemaker/request.py``) produces, unchanged:
its ``HyperParameters``, channels, ``Environment``, entry point and distribution flags are what the
simulated hosts see. Usable from a plain Python process (no Airflow import), thread-safe.

Public API (stable)::

    from airflow_dist_training.local.executor import LocalExecutor
    from airflow_dist_training.local.store import ObjectStore

    executor = LocalExecutor(jobs_root="/tmp/jobs", store=ObjectStore("/tmp/buckets"))
    job = executor.start(request)              # request: a CreateTrainingJob dict
    job.describe()                             # DescribeTrainingJob-shaped dict
    job.logs("algo-1")                         # that host's output lines so far
    job.stop()                                 # StopTrainingJob: SIGTERM, then SIGKILL
    job.wait(timeout=600)                      # -> describe() once the job has ended
    job.host_dirs()                            # {"algo-1": {"opt_ml", "model", "output", "checkpoints"}}
    executor.get(name)                         # the handle of a job started by this executor

* ``store``: where the request's ``s3://`` URIs live (:class:`~airflow_dist_training.local.store.ObjectStore`):
  a folder standing in for buckets (default ``<jobs_root>/_buckets``), real S3 through a boto3
  client, plus mounts of local folders. Code (``sagemaker_submit_directory`` or the ``code``
  channel) and channels are read from it, and ``model.tar.gz``, ``output.tar.gz`` and checkpoints
  are written to it, under the URIs the request names.
* Each simulated host ``algo-N`` gets its own ``/opt/ml`` tree under ``<jobs_root>/<job>/``
  (``algo-1``: the job folder itself, the others ``hosts/algo-N``), and runs in Linux namespaces
  when this machine allows it (``local/hosts.py``): real ``/opt/ml``, host names that resolve,
  master port 7777. Otherwise the relocated layout is used, with one warning.
* What runs on a host is decided by the request as on SageMaker:

  - ``AlgorithmSpecification.ContainerEntrypoint`` (our launcher mode, ``ModelTrainer``-style):
    that command and its ``ContainerArguments`` (``python``/``python3`` is the job's interpreter);
  - otherwise a framework image in script mode (``sagemaker_program``): AWS's own in-container
    toolkit (``sagemaker-training`` + ``sagemaker-pytorch-training``, the ``train`` entry point)
    when it is installed for the job's interpreter and namespaces are available; else the
    project's re-implementation of that contract (``local/contract.py``).

* Refused up front, with the reason and the nearest local equivalent: MPI (``sagemaker_mpi_enabled``,
  launcher ``mpirun``), SMDDP, SageMaker model parallel, TensorFlow parameter server /
  MultiWorkerMirrored, Pipe input mode. :class:`LocalRequestError` carries the problems.
* ``describe()`` reports ``TrainingJobStatus`` (InProgress, Stopping, Completed, Failed, Stopped),
  ``SecondaryStatus`` and its transitions, ``FailureReason`` (the failing host's
  ``/opt/ml/output/failure``, truncated to 1,024 characters as SageMaker does, or
  ``MaxRuntimeExceeded`` with the log tail, or a rendezvous/name-resolution hang with its cause),
  ``FinalMetricDataList`` (from ``MetricDefinitions``), ``ModelArtifacts`` and timestamps.

The work is split by job: ``request_plan.py`` (request -> hosts' plans, before anything runs),
``supervisor.py`` with ``prepare.py`` and ``launcher.py`` (the hosts' processes, checkpoints,
stop, failures), ``hangs.py`` (rendezvous and name-resolution hangs, a lost port race) and
``job.py`` (the handle). This module is their facade.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from airflow_dist_training.local.job import LocalTrainingJob
from airflow_dist_training.local.request_plan import JobOptions, LocalRequestError, RequestPlan, plan_request
from airflow_dist_training.local.store import ObjectStore

__all__ = ["JobOptions", "LocalExecutor", "LocalRequestError", "LocalTrainingJob", "RequestPlan"]

LogFn = Callable[[str], None]


class LocalExecutor:
    """Runs ``CreateTrainingJob`` requests on this machine; one handle per job name (thread-safe).

    :param jobs_root: where each job's folder (``<jobs_root>/<job name>``) is created.
    :param store: where the request's ``s3://`` URIs live (default: ``<jobs_root>/_buckets``).
    :param options: default :class:`JobOptions` of the jobs started.
    """

    def __init__(
        self, jobs_root: str | Path, store: ObjectStore | None = None, options: JobOptions | None = None
    ) -> None:
        self.jobs_root = Path(jobs_root).absolute()
        self.store = store or ObjectStore(self.jobs_root / "_buckets")
        self.options = options or JobOptions()
        self._jobs: dict[str, LocalTrainingJob] = {}
        self._lock = threading.Lock()

    def plan(
        self,
        request: Mapping[str, Any],
        *,
        store: ObjectStore | None = None,
        options: JobOptions | None = None,
    ) -> RequestPlan:
        """Check a request without running it (raises :class:`LocalRequestError`)."""
        return plan_request(request, self.jobs_root, store or self.store, options or self.options)

    def start(
        self,
        request: Mapping[str, Any],
        *,
        store: ObjectStore | None = None,
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
