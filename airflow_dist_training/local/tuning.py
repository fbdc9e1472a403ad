"""A hyperparameter tuning job on this machine: the local backend's ``CreateHyperParameterTuningJob``.

Planned as SageMaker gets it (``sagemaker/tuning.py``) and run as the test endpoint runs it, from
the same pure functions (``sagemaker/tuning_jobs.py``), each training job on the local executor.
Durable through its ledger ``tuning.json`` (docs/tuning.md): a local job dies with its process, so
a retry resumes from what the ledger recorded, never reusing a name for another configuration.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.local.hosts import available_cpus
from airflow_dist_training.sagemaker.tuning_jobs import (
    RUNNING,
    best_summary,
    job_counters,
    objective_counters,
    objective_fields,
    runtime_exceeded,
    stops_early,
    training_job_name,
    training_request,
    tuning_configurations,
    tuning_outcome,
)
from airflow_dist_training.storage import atomic_write

LEDGER = "tuning.json"
POLL_SECONDS = 0.2
TERMINAL = ("Completed", "Failed", "Stopped")
LogFn = Callable[[str], None]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def local_parallelism(
    max_parallel_jobs: int, processes_per_job: int, cpus: int | None = None
) -> tuple[int, str]:
    """How many training jobs run at once here: the tuning job's ``MaxParallelTrainingJobs``, lowered
    so that the jobs' processes fit this machine's cores (at least one job). Returns it and why."""
    cpus = available_cpus() if cpus is None else cpus
    fit = max(1, cpus // max(1, processes_per_job))
    if fit >= max_parallel_jobs:
        return max_parallel_jobs, f"MaxParallelTrainingJobs {max_parallel_jobs}"
    return fit, (
        f"MaxParallelTrainingJobs {max_parallel_jobs}, lowered to {fit}: {cpus} cores here, "
        f"{processes_per_job} training process(es) per job"
    )


class LocalTuningJob:
    """One tuning job of the local backend (its ledger, its training jobs, its stop), run by
    ``hook``'s executor; ``parallel`` training jobs at once (default :func:`local_parallelism`,
    never more than the tuning section's ``max_parallel_jobs``)."""

    def __init__(
        self,
        hook: Any,
        spec: Any,
        tuning: Any,
        name: str,
        *,
        run_identity: str | None = None,
        region: str = "us-east-1",
        parallel: int | None = None,
        log: LogFn | None = None,
    ) -> None:
        self.hook = hook
        self.spec = spec
        self.tuning = tuning
        self.name = name
        self.run_identity = run_identity
        self.region = region
        self.log: LogFn = log or (lambda line: None)
        limit = tuning.max_parallel_jobs
        processes = spec.compute.instance_count * (spec.distribution.processes_per_host or 1)
        self.parallel, self.parallel_why = local_parallelism(limit, processes)
        if parallel:
            self.parallel = min(parallel, limit)
            self.parallel_why = f"{self.parallel} (asked {parallel}, MaxParallelTrainingJobs {limit})"
        self.dir = Path(hook.job_dir(name))
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._handles: dict[str, Any] = {}
        self.ledger: dict[str, Any] | None = self.read()
        #: The run passed its ``deadline`` (the task's max_wait_seconds): it was stopped.
        self.timed_out = False

    # -- the ledger ---------------------------------------------------------------------------------

    @property
    def ledger_path(self) -> Path:
        return self.dir / LEDGER

    def read(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.ledger_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    @property
    def status(self) -> str | None:
        """The recorded ``HyperParameterTuningJobStatus`` (None: never started)."""
        return None if self.ledger is None else str(self.ledger["HyperParameterTuningJobStatus"])

    def _write(self) -> None:
        with self._lock:
            assert self.ledger is not None
            atomic_write(self.ledger_path, json.dumps(self.ledger, indent=1, sort_keys=True).encode())

    # -- describe -------------------------------------------------------------------------------------

    def summaries(self) -> list[dict[str, Any]]:
        """``HyperParameterTrainingJobSummary`` of each training job started, in launch order."""
        assert self.ledger is not None
        metric = self.ledger["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]
        objective = (metric["MetricName"], metric["Type"])
        return [
            {
                "TrainingJobName": job["TrainingJobName"],
                "TrainingJobArn": job.get("TrainingJobArn"),
                "TuningJobName": self.name,
                "TrainingJobStatus": job["TrainingJobStatus"],
                "TunedHyperParameters": dict(job["TunedHyperParameters"]),
                **({"FailureReason": job["FailureReason"]} if job.get("FailureReason") else {}),
                **objective_fields(job["TrainingJobStatus"], job.get("FinalMetrics") or {}, *objective),
            }
            for job in self.ledger["TrainingJobs"]
        ]

    def describe(self) -> dict[str, Any]:
        """A ``DescribeHyperParameterTuningJob``-shaped dict (JSON types only), plus the training
        jobs' summaries (``TrainingJobSummaries``)."""
        with self._lock:
            assert self.ledger is not None
            summaries = self.summaries()
            objective = self.ledger["HyperParameterTuningJobConfig"]["HyperParameterTuningJobObjective"]
            desc = {
                k: v for k, v in self.ledger.items() if k not in ("TrainingJobs", "TrainingJobDefinition")
            }
            desc["TrainingJobStatusCounters"] = job_counters(summaries)
            desc["ObjectiveStatusCounters"] = objective_counters(summaries)
            best = best_summary(summaries, objective["Type"])
            if best is not None:
                desc["BestTrainingJob"] = best
            desc["TrainingJobSummaries"] = summaries
            return desc

    def training_result(self, job_name: str) -> dict[str, Any]:
        """The ``TrainingResult`` of one of its Completed training jobs."""
        assert self.ledger is not None
        for job in self.ledger["TrainingJobs"]:
            if job["TrainingJobName"] == job_name and job.get("Result"):
                return dict(job["Result"])
        raise KeyError(f"no result of training job {job_name!r} in tuning job {self.name}")

    # -- run --------------------------------------------------------------------------------------------

    def run(self, deadline: float | None = None) -> dict[str, Any]:
        """Run (or resume) the tuning job to its end; returns :meth:`describe`. A Completed, Failed
        or Stopped tuning job is described without running anything. Past ``deadline`` (POSIX time:
        the task's ``max_wait_seconds``) the tuning job is stopped and ``timed_out`` set."""
        if self.status in TERMINAL:
            return self.describe()
        with self._exclusive():
            self.ledger = self.read()  # what the process that held the lock last wrote
            if self.status in TERMINAL:
                return self.describe()
            request, store, options = self._plan()
            self._start_ledger(request)
            try:
                self._loop(request, store, options, deadline)
            except BaseException as exc:  # never leave training jobs running behind a failed task
                self._abandon(exc)
                raise
            return self.describe()

    @contextlib.contextmanager
    def _exclusive(self) -> Any:
        """Only one process runs a tuning job: another try still running it is refused, not joined."""
        self.dir.mkdir(parents=True, exist_ok=True)
        # the lock is held while the tuning job runs: closing the file releases it
        with open(self.dir / ".lock", "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                owner = handle.read().strip() or "another process"
                raise TrainingJobError(
                    f"Local tuning job {self.name} is being run by {owner}: not running it twice",
                    job_name=self.name,
                    status="InProgress",
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"process {os.getpid()}")
            handle.flush()
            yield

    def _plan(self) -> tuple[dict[str, Any], Any, Any]:
        """The tuning request (over the local training request, code staged) and where its jobs run;
        the first training job's request is checked by the executor before anything starts."""
        from airflow_dist_training.sagemaker.tuning import tuning_request

        sub = self.hook.submission(self.spec, self.name, region=self.region, run_identity=self.run_identity)
        for warning in sub.warnings:
            self.log(f"[local] WARNING {warning}")
        request = tuning_request(self.spec, self.tuning, self.name, sub.request)
        first = tuning_configurations(request)[0]
        self.hook.executor().plan(
            training_request(request, training_job_name(self.name, 1), first),
            store=sub.store,
            options=sub.options,
        )
        return request, sub.store, sub.options

    def _start_ledger(self, request: dict[str, Any]) -> None:
        if self.ledger is not None:  # a try that died: resume
            ended = [j for j in self.ledger["TrainingJobs"] if j["TrainingJobStatus"] in TERMINAL]
            self.log(
                f"Resuming local tuning job {self.name}: {len(ended)} of its training jobs ended "
                f"earlier and are not run again"
            )
            return
        self.ledger = {
            "HyperParameterTuningJobName": self.name,
            "HyperParameterTuningJobArn": f"local://{self.dir}",
            "HyperParameterTuningJobStatus": "InProgress",
            "HyperParameterTuningJobConfig": request["HyperParameterTuningJobConfig"],
            "TrainingJobDefinition": request["TrainingJobDefinition"],
            "CreationTime": _now(),
            "StopRequested": False,
            "MaxRunning": 0,
            "TrainingJobs": [],
        }
        self._write()

    def _loop(self, request: dict[str, Any], store: Any, options: Any, deadline: float | None) -> None:
        assert self.ledger is not None
        pending = tuning_configurations(request)[len(self.ledger["TrainingJobs"]) :]
        for job in self.ledger["TrainingJobs"]:  # their process died with the earlier try
            if job["TrainingJobStatus"] in RUNNING:
                self.log(
                    f"Training job {job['TrainingJobName']} ended with the earlier try: running it again"
                )
                self._launch(job, request, store, options)
        self.log(
            f"Local tuning job {self.name}: {len(pending) + len(self._handles)} training jobs to run, "
            f"{self.parallel} at a time ({self.parallel_why})"
        )
        while True:
            self._collect()
            if not self._stop.is_set() and self._limit_reached(deadline):
                pending = []
            if self._stop.is_set():
                pending = []
            self._stop_early()
            while pending and len(self._handles) < self.parallel:
                index = len(self.ledger["TrainingJobs"]) + 1
                job = {
                    "TrainingJobName": training_job_name(self.name, index),
                    "TunedHyperParameters": pending.pop(0),
                    "TrainingJobStatus": "InProgress",
                }
                with self._lock:
                    self.ledger["TrainingJobs"].append(job)
                    self._write()  # recorded before it starts: a crash in between reruns this name
                self._launch(job, request, store, options)
            with self._lock:
                if len(self._handles) > self.ledger["MaxRunning"]:
                    self.ledger["MaxRunning"] = len(self._handles)
                    self._write()
            if not pending and not self._handles:
                break
            time.sleep(POLL_SECONDS)
        self._end()

    def _limit_reached(self, deadline: float | None) -> bool:
        """The limits on the whole tuning job: the task's wait (``deadline``: stop it, as the SageMaker
        path stops its tuning job) and ``MaxRuntimeInSeconds`` (stop the running training jobs,
        start no more: it ends as they did). True when one was reached now or before."""
        assert self.ledger is not None
        if deadline is not None and time.time() >= deadline:
            self.log(f"Local tuning job {self.name}: still InProgress at the task's max_wait_seconds: stopping it")
            self.timed_out = True
            self.stop(self.hook.stop_grace_seconds, wait=False)
            return True
        limits = self.ledger["HyperParameterTuningJobConfig"]["ResourceLimits"]
        created = dt.datetime.strptime(self.ledger["CreationTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
        limit = runtime_exceeded(created.timestamp(), limits, time.time())
        if limit is None:
            return False
        if not self.ledger.get("RuntimeLimitReached"):
            self.log(
                f"Local tuning job {self.name}: MaxRuntimeInSeconds {limit} reached: stopping its "
                f"{len(self._handles)} running training job(s), starting no more"
            )
            with self._lock:
                self.ledger["RuntimeLimitReached"] = True  # a retry starts nothing either
                self._write()
        for handle in list(self._handles.values()):
            handle.stop(self.hook.stop_grace_seconds, wait=False)
        return True

    def _objective_series(self, handle: Any) -> list[float]:
        """The objective metric's values the training job reported so far (its first host's: one per epoch)."""
        points = [p for p in handle.metric_points() if p.name == self.tuning.objective.metric]
        return [p.value for p in points if p.host == points[0].host] if points else []

    def _stop_early(self) -> None:
        """``TrainingJobEarlyStoppingType: Auto``: stop each running training job whose objective is
        worse than the median of the earlier training jobs' running averages at the same epoch."""
        assert self.ledger is not None
        config = self.ledger["HyperParameterTuningJobConfig"]
        if config.get("TrainingJobEarlyStoppingType") != "Auto":
            return
        earlier = [
            j["ObjectiveSeries"]
            for j in self.ledger["TrainingJobs"]
            if j["TrainingJobStatus"] in TERMINAL and j.get("ObjectiveSeries")
        ]
        objective = config["HyperParameterTuningJobObjective"]
        for name, handle in list(self._handles.items()):
            job = next(j for j in self.ledger["TrainingJobs"] if j["TrainingJobName"] == name)
            current = self._objective_series(handle)
            median = None if job.get("StoppedEarly") else stops_early(current, earlier, objective["Type"])
            if median is None:
                continue
            self.log(
                f"Training job {name} stopped early: {objective['MetricName']} = {current[-1]:g} at epoch "
                f"{len(current)}, worse than {median:g} (the median of the earlier training jobs' running averages)"
            )
            with self._lock:
                job["StoppedEarly"] = True
                self._write()
            handle.stop(self.hook.stop_grace_seconds, wait=False)

    def _launch(self, job: dict[str, Any], request: dict[str, Any], store: Any, options: Any) -> None:
        name = job["TrainingJobName"]
        executor = self.hook.executor()
        current = executor.get(name)
        if current is not None and not current.done:  # still running in this process: reattach
            self._handles[name] = current
            return
        tag = name.rsplit("-", 2)[-2]
        self.log(f"Starting training job {name} with {json.dumps(job['TunedHyperParameters'])}")
        handle = executor.start(
            training_request(request, name, job["TunedHyperParameters"]),
            store=store,
            options=options,
            log=lambda line: self.log(f"[{tag}] {line}"),
        )
        with self._lock:
            job["TrainingJobArn"] = handle.arn
            self._handles[name] = handle

    def _collect(self) -> None:
        """Record the training jobs that ended (status, metrics, failure, result)."""
        assert self.ledger is not None
        for name, handle in list(self._handles.items()):
            if not handle.done:
                continue
            desc = handle.describe()
            with self._lock:
                if self._handles.pop(name, None) is None:  # recorded meanwhile (a stop from on_kill)
                    continue
                job = next(j for j in self.ledger["TrainingJobs"] if j["TrainingJobName"] == name)
                job["TrainingJobStatus"] = desc["TrainingJobStatus"]
                job["FinalMetrics"] = {
                    m["MetricName"]: m["Value"] for m in desc.get("FinalMetricDataList") or []
                }
                job["ObjectiveSeries"] = self._objective_series(handle)  # what early stopping compares
                if desc.get("FailureReason"):
                    job["FailureReason"] = desc["FailureReason"]
                if desc["TrainingJobStatus"] == "Completed":
                    job["Result"] = dict(handle.result())
                self._write()
            value = job["FinalMetrics"].get(self.tuning.objective.metric)
            self.log(
                f"Training job {name} ended {desc['TrainingJobStatus']}"
                + (f": {self.tuning.objective.metric} = {value}" if value is not None else "")
                + (f" ({desc['FailureReason']})" if desc.get("FailureReason") else "")
            )

    def _end(self, exc: BaseException | None = None) -> None:
        """Record the outcome, or (``exc``: the loop itself failed) Failed with the cause; a tuning
        job that ended already (a stop from ``on_kill``) stays as it ended."""
        with self._lock:
            if self.ledger is None or self.ledger["HyperParameterTuningJobStatus"] in TERMINAL:
                return
            config = self.ledger["HyperParameterTuningJobConfig"]
            metric, stopped = config["HyperParameterTuningJobObjective"]["MetricName"], self._stop.is_set()
            if exc is None:
                status, reason = tuning_outcome(self.summaries(), metric, stop_requested=stopped)
            else:
                status = "Stopped" if stopped else "Failed"
                reason = f"InternalServerError: {type(exc).__name__}: {exc}"[:1024]
            self.ledger.update(
                HyperParameterTuningJobStatus=status,
                HyperParameterTuningEndTime=_now(),
                StopRequested=stopped,
            )
            if reason:
                self.ledger["FailureReason"] = reason
            self._write()

    def _abandon(self, exc: BaseException) -> None:
        """The loop itself failed (not a training job): stop what runs, end with the cause."""
        for handle in list(self._handles.values()):
            with contextlib.suppress(Exception):
                handle.stop(self.hook.stop_grace_seconds, wait=True)
        with contextlib.suppress(Exception):
            self._collect()
        self._end(exc)

    def stop(self, grace_seconds: float | None = None, *, wait: bool = True) -> None:
        """Stop the running training jobs; nothing more starts; the tuning job ends ``Stopped``.

        With ``wait`` (from ``on_kill`` or a SIGTERM handler, where the loop may never run again)
        the training jobs' processes are gone and the ledger says ``Stopped`` when it returns."""
        self._stop.set()
        for handle in list(self._handles.values()):
            handle.stop(grace_seconds, wait=wait)
        if wait and self.ledger is not None:
            self._collect()
            self._end()
