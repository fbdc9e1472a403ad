"""Training jobs of the emulator: moto's job record, driven by the local backend's request executor.

moto keeps the job record and answers ``Describe``/``List``; the request as sent runs on
:class:`~airflow_dist_training.local.executor.LocalExecutor` against the endpoint's own S3, and its
``describe()`` is copied onto moto's record while the job runs. Output goes to CloudWatch Logs and
metrics (:mod:`airflow_dist_training.emulator.logs`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import threading
import time
from pathlib import Path
from typing import Any

from airflow_dist_training.emulator.faults import (
    CAPACITY_REASON,
    HOST_FAILURE_REASON,
    MAX_WAIT_MESSAGE,
    SPOT_CAPACITY_MESSAGE,
    SPOT_REASON,
    Faults,
    max_wait_reason,
)
from airflow_dist_training.emulator.logs import TRAINING_LOG_GROUP, JobLogs, JobMetrics

log = logging.getLogger(__name__)
POLL_SECONDS = 0.2
# how often an armed host failure or spot interruption looks for the job's first new complete checkpoint
HOST_FAILURE_POLL_SECONDS = 0.02
# Managed spot training's saving, as BillableTimeInSeconds shows it (SageMaker: "up to 90%" against
# on-demand; the savings are 1 - Billable/TrainingTimeInSeconds). An invented figure: no price is paid here.
SPOT_SAVINGS = 0.7
# A CI box under load can take a minute to start torch: a rendezvous "hang" only after 5 minutes.
# The stop grace is SageMaker's 120 s, or $ADT_STOP_GRACE_SECONDS (JobOptions).
EXECUTOR_OPTIONS: dict[str, Any] = {"hang_seconds": 300.0}


def naive_utc(value: Any) -> Any:
    """moto compares times as naive UTC (``LastModifiedTimeAfter`` filters): store them so."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def moto_now() -> dt.datetime:
    """Now, as moto keeps times (naive UTC)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class MotoRun:
    """A job the emulator runs beside moto's ``record`` of it; ``name_key``: the request's job name field."""

    def __init__(self, record: Any, request: dict[str, Any], name_key: str) -> None:
        self.record = record
        self.request = request
        self.name = str(request[name_key])
        self.done = threading.Event()

    def set(self, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(self.record, key, value)
        self.record.last_modified_time = moto_now()


class TrainingRun(MotoRun):
    """One training job: the executor's handle, moto's record, the log streams."""

    def __init__(self, record: Any, request: dict[str, Any], logs: JobLogs, metrics: JobMetrics) -> None:
        super().__init__(record, request, "TrainingJobName")
        self.logs = logs
        self.metrics = metrics
        self.job: Any = None
        self.mounts: dict[str, Path] = {}
        self.host_failed = False
        # managed spot: MaxWaitTimeInSeconds runs from the job's creation (waiting for capacity,
        # interruptions and training together); past it the job is stopped
        stopping = request.get("StoppingCondition") or {}
        self.max_wait: int | None = (
            int(stopping["MaxWaitTimeInSeconds"])
            if request.get("EnableManagedSpotTraining") and stopping.get("MaxWaitTimeInSeconds")
            else None
        )
        self.started = time.monotonic()
        # why the endpoint stopped the job: "interrupted" (spot capacity reclaimed) or "max_wait"
        self.ended_by: str | None = None
        self.ended_at: dt.datetime | None = None
        self.thread: threading.Thread | None = None

    def publish_metrics(self) -> None:
        """Send the metric points parsed since the last call (CloudWatch, as SageMaker does)."""
        self.metrics.publish(self.job.metric_points(self.metrics.sent))

    def apply(self, desc: dict[str, Any]) -> None:
        """Copy the executor's DescribeTrainingJob fields onto moto's record."""
        status = desc.get("TrainingJobStatus")
        secondary = desc.get("SecondaryStatus")
        reason = desc.get("FailureReason")
        transitions = [
            {k: naive_utc(v) for k, v in t.items()} for t in desc.get("SecondaryStatusTransitions") or []
        ]
        if self.ended_by is not None and status in ("Stopped", "Stopping", "Failed"):
            status, secondary, reason, transitions = self._spot_end(status, transitions)
        if self.host_failed:
            status, secondary, reason, transitions = _host_failure(status, secondary, reason, transitions)
        fields: dict[str, Any] = {
            "training_job_status": status,
            "secondary_status": secondary,
            "secondary_status_transitions": transitions,
            "final_metric_data_list": [
                {**m, "Timestamp": naive_utc(m.get("Timestamp"))}
                for m in desc.get("FinalMetricDataList") or []
            ],
            "failure_reason": reason,
        }
        for key, attr in (
            ("TrainingStartTime", "training_start_time"),
            ("TrainingEndTime", "training_end_time"),
            ("ModelArtifacts", "model_artifacts"),
        ):
            if key in desc:
                fields[attr] = naive_utc(desc[key])
        if "TrainingTimeInSeconds" in desc:
            fields.update(
                billing(
                    int(desc["TrainingTimeInSeconds"]), bool(self.request.get("EnableManagedSpotTraining"))
                )
            )
        changed = any(getattr(self.record, k, None) != v for k, v in fields.items())
        if changed:
            self.set(**fields)

    def end_by(self, why: str) -> None:
        """Mark why the endpoint stops the job (``interrupted`` or ``max_wait``); the first reason stays."""
        if self.ended_by is None:
            self.ended_by, self.ended_at = why, moto_now()

    def past_max_wait(self) -> bool:
        return self.max_wait is not None and time.monotonic() - self.started > self.max_wait

    def _spot_end(
        self, status: str, transitions: list[dict[str, Any]]
    ) -> tuple[str, str, str | None, list[dict[str, Any]]]:
        """AWS's view of a spot job the endpoint stopped: while its hosts stop, an interrupted job is
        ``InProgress``/``Interrupted`` (a job past MaxWait ``Stopping``); then ``Stopped`` with
        ``MaxWaitTimeExceeded`` and the reason, its checkpoints and model uploaded by the stop."""
        kept = [t for t in transitions if t["Status"] not in ("Stopping", "Stopped", "Failed", "Completed")]
        now = self.ended_at or moto_now()
        if self.ended_by == "interrupted" and not any(t["Status"] == "Interrupted" for t in kept):
            if kept and "EndTime" not in kept[-1]:
                kept[-1]["EndTime"] = now
            kept.append({"Status": "Interrupted", "StartTime": now, "StatusMessage": SPOT_REASON})
        if status == "Stopping":
            if self.ended_by == "interrupted":
                return "InProgress", "Interrupted", None, kept
            if kept and "EndTime" not in kept[-1]:
                kept[-1]["EndTime"] = now
            stopping = {"Status": "Stopping", "StartTime": now, "StatusMessage": "Stopping the training job"}
            return "Stopping", "Stopping", None, [*kept, stopping]
        reason = max_wait_reason(self.max_wait, interrupted=self.ended_by == "interrupted")
        now = moto_now()
        if kept and "EndTime" not in kept[-1]:
            kept[-1]["EndTime"] = now
        kept.append(
            {
                "Status": "MaxWaitTimeExceeded",
                "StartTime": now,
                "EndTime": now,
                "StatusMessage": MAX_WAIT_MESSAGE,
            }
        )
        return "Stopped", "MaxWaitTimeExceeded", reason, kept


def billing(training_seconds: int, spot: bool) -> dict[str, int]:
    """TrainingTimeInSeconds and BillableTimeInSeconds as SageMaker reports them: billable is the
    wall-clock time an instance ran (times InstanceCount for the bill), less the spot saving."""
    billable = training_seconds
    if spot and training_seconds > 0:
        billable = max(1, round(training_seconds * (1 - SPOT_SAVINGS)))
    return {"training_time_in_seconds": training_seconds, "billable_time_in_seconds": billable}


def _host_failure(
    status: Any, secondary: Any, reason: Any, transitions: list[dict[str, Any]]
) -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    """AWS's view of a job whose instance failed: no ``Stopping``, it ends ``Failed`` with the reason
    (also when its processes had finished: the instance failed before the job completed)."""
    if status in ("Stopping", "InProgress"):
        return "InProgress", "Training" if secondary == "Stopping" else secondary, None, transitions
    kept = [t for t in transitions if t["Status"] not in ("Stopping", "Stopped", "Failed", "Completed")]
    now = moto_now()
    if kept and "EndTime" not in kept[-1]:
        kept[-1]["EndTime"] = now
    kept.append({"Status": "Failed", "StartTime": now, "StatusMessage": HOST_FAILURE_REASON})
    return "Failed", "Failed", HOST_FAILURE_REASON, kept


class TrainingJobs:
    """Runs the emulator's training jobs (thread-safe)."""

    def __init__(
        self, root: Path, clients: Any, faults: Faults, relay_ports: list[int], debug_stream: bool = False
    ) -> None:
        self.root = root
        self.debug_stream = debug_stream
        self.clients = clients
        self.faults = faults
        self.relay_ports = relay_ports
        self.runs: dict[str, TrainingRun] = {}
        self._lock = threading.Lock()
        self._executor: Any = None

    @property
    def executor(self) -> Any:
        if self._executor is None:
            from airflow_dist_training.local.executor import JobOptions, LocalExecutor
            from airflow_dist_training.local.store import RequestStore
            from airflow_dist_training.storage import StoreOptions

            store = RequestStore(self.root / "store", s3=StoreOptions(aws_conn_id=None, s3_client=self.clients("s3")))
            options = JobOptions(**EXECUTOR_OPTIONS, relay_ports=list(self.relay_ports))
            self._executor = LocalExecutor(self.root / "jobs", store=store, options=options)
        return self._executor

    def job_options(self, arn: str) -> Any:
        """The executor's options for the job of ``arn``: the job runs in the region and account its
        record reports (``TRAINING_JOB_ARN``, ``SAGEMAKER_REGION``, ``AWS_REGION``), as on SageMaker,
        in an environment of its image's and SageMaker's variables only (not the endpoint's)."""
        _, _, _, region, account, _ = arn.split(":", 5)
        options = self.executor.options
        env = {**options.extra_env, "AWS_REGION": region, "AWS_DEFAULT_REGION": region}
        from airflow_dist_training.local.job_env import image_environ

        return dataclasses.replace(
            options, region=region, account=account, extra_env=env, image_environ=image_environ()
        )

    def check(self, request: dict[str, Any]) -> None:
        """Raise ``LocalRequestError`` when the request cannot run here (before moto records it)."""
        self.executor.plan(request)

    def start(self, record: Any, request: dict[str, Any], mounts: dict[str, Path] | None = None) -> None:
        """Run the job; ``mounts`` maps URI prefixes (``fsx://<id>/<MountName>``) to local folders."""
        name = str(request["TrainingJobName"])
        # moto drops these (and replaces MetricDefinitions with a fake): keep them as sent
        record.environment = request.get("Environment")
        record.retry_strategy = request.get("RetryStrategy")
        record.algorithm_specification = dict(request.get("AlgorithmSpecification") or {})
        from airflow_dist_training.emulator.mlflow import with_mlflow_environment

        if request.get("MlflowConfig"):  # moto drops it; DescribeTrainingJob answers it
            record.mlflow_config = request["MlflowConfig"]
        request = with_mlflow_environment(request)  # MlflowConfig: what SageMaker gives the job
        given = request.get("Environment") or {}
        if "MLFLOW_RUN_ID" in given:  # the run SageMaker created for the job
            record.mlflow_details = {
                "MlflowExperimentId": given["MLFLOW_EXPERIMENT_ID"],
                "MlflowRunId": given["MLFLOW_RUN_ID"],
            }
        run = TrainingRun(
            record,
            request,
            JobLogs(self.clients("logs"), TRAINING_LOG_GROUP, name, debug_stream=self.debug_stream),
            JobMetrics(self.clients("cloudwatch"), name),
        )
        run.mounts = dict(mounts or {})
        now = moto_now()
        run.set(
            training_job_status="InProgress",
            secondary_status="Starting",
            secondary_status_transitions=[
                {"Status": "Starting", "StartTime": now, "StatusMessage": "Launching requested ML instances"}
            ],
            final_metric_data_list=[],
            training_start_time=None,
            training_end_time=None,
            model_artifacts=None,
        )
        with self._lock:
            self.runs[name] = run
        run.thread = threading.Thread(
            target=self._main, args=(run,), name=f"emulator-training-{name}", daemon=True
        )
        run.thread.start()

    def _main(self, run: TrainingRun) -> None:
        try:
            if self.faults.take("capacity_failures"):
                time.sleep(0.3)
                now = moto_now()
                run.set(
                    training_job_status="Failed",
                    secondary_status="Failed",
                    failure_reason=CAPACITY_REASON,
                    training_end_time=now,
                    secondary_status_transitions=[
                        {
                            "Status": "Starting",
                            "StartTime": run.record.creation_time,
                            "EndTime": now,
                            "StatusMessage": "Launching requested ML instances",
                        },
                        {"Status": "Failed", "StartTime": now, "StatusMessage": CAPACITY_REASON},
                    ],
                )
                return
            if run.max_wait is not None and not self._wait_for_spot_capacity(run):
                return
            store = self.executor.store.with_mounts(run.mounts) if run.mounts else None
            host_failure = self.faults.take("host_failures")
            interruption = (
                run.max_wait is not None and not host_failure and self.faults.take("spot_interruptions")
            )
            restored = self._checkpoints_in_s3(run) if host_failure or interruption else set()
            run.job = self.executor.start(
                run.request, log=run.logs.add, store=store, options=self.job_options(run.record.arn)
            )
            if host_failure or interruption:
                threading.Thread(
                    target=self._strike_after_new_checkpoint,
                    args=(run, self.fail_hosts if host_failure else self.interrupt, restored),
                    name=f"emulator-fault-{run.name}",
                    daemon=True,
                ).start()
            while not run.job.done:
                if run.past_max_wait() and run.ended_by is None:
                    log.info("emulator: training job %s exceeded MaxWaitTimeInSeconds", run.name)
                    run.logs.add(f"[emulator] MaxWaitTimeExceeded: stopping after {run.max_wait} s")
                    run.end_by("max_wait")
                    run.job.stop()  # SIGTERM, SIGKILL after the grace; then the uploads of a stop
                run.apply(run.job.describe())
                run.logs.flush()
                run.publish_metrics()
                time.sleep(POLL_SECONDS)
            if host_failure and not run.host_failed:
                # the job outran the fault (a busy machine): its instance fails before it completes
                run.host_failed = True
                run.logs.add(f"[emulator] {HOST_FAILURE_REASON}")
            run.logs.flush()
            run.publish_metrics()
            run.apply(run.job.describe())
        except Exception as exc:  # the emulator must never leave a job InProgress forever
            log.exception("emulator: training job %s crashed", run.name)
            run.set(
                training_job_status="Failed",
                secondary_status="Failed",
                failure_reason=f"InternalServerError: emulator: {type(exc).__name__}: {exc}"[:1024],
                training_end_time=moto_now(),
            )
        finally:
            with contextlib.suppress(Exception):
                run.logs.flush()
            run.done.set()

    def get(self, name: str) -> TrainingRun | None:
        with self._lock:
            return self.runs.get(name)

    def stop(self, name: str) -> bool:
        """StopTrainingJob: SIGTERM to every host, SIGKILL after the grace period; ends ``Stopped``."""
        run = self.get(name)
        if run is None or run.done.is_set() or run.job is None:
            return False
        run.set(training_job_status="Stopping", secondary_status="Stopping")
        run.job.stop()
        return True

    def interrupt(self, name: str) -> bool:
        """Fault: reclaim a spot job's capacity for longer than its MaxWaitTimeInSeconds. Its hosts get
        SageMaker's stop (SIGTERM, the grace, then the uploads: its checkpoints reach S3); it shows
        ``Interrupted`` while they stop, then ends ``Stopped`` / ``MaxWaitTimeExceeded`` (the
        endpoint does not wait the rest of MaxWait out: it never relaunches a job's instances)."""
        run = self.get(name)
        if run is None or run.done.is_set() or run.job is None:
            return False
        run.end_by("interrupted")
        run.logs.add(f"[emulator] {SPOT_REASON}")
        run.job.stop()
        return True

    def fail_hosts(self, name: str) -> bool:
        """Fault: the job's instances fail; every host's processes are killed, the job ends ``Failed``."""
        run = self.get(name)
        if run is None or run.done.is_set() or run.job is None:
            return False
        run.host_failed = True
        run.logs.add(f"[emulator] {HOST_FAILURE_REASON}")
        run.job.stop(grace_seconds=0)  # no grace: a failed instance does not wait for anyone
        return True

    def _wait_for_spot_capacity(self, run: TrainingRun) -> bool:
        """The armed wait for spot capacity (``Starting``); it counts towards MaxWaitTimeInSeconds.
        False: the wait ran past it, and the job ended ``Stopped`` / ``MaxWaitTimeExceeded`` unlaunched."""
        wait = self.faults.take_capacity_wait()
        if not wait:
            return True
        created = run.record.creation_time
        run.set(
            secondary_status_transitions=[
                {"Status": "Starting", "StartTime": created, "StatusMessage": SPOT_CAPACITY_MESSAGE}
            ]
        )
        assert run.max_wait is not None
        remaining = run.max_wait - (time.monotonic() - run.started)
        if wait < remaining:
            time.sleep(wait)
            return True
        time.sleep(max(0.0, remaining))
        run.end_by("max_wait")
        now = moto_now()
        run.set(
            training_job_status="Stopped",
            secondary_status="MaxWaitTimeExceeded",
            failure_reason=max_wait_reason(run.max_wait, interrupted=False),
            training_end_time=now,
            secondary_status_transitions=[
                {
                    "Status": "Starting",
                    "StartTime": created,
                    "EndTime": now,
                    "StatusMessage": SPOT_CAPACITY_MESSAGE,
                },
                {
                    "Status": "MaxWaitTimeExceeded",
                    "StartTime": now,
                    "EndTime": now,
                    "StatusMessage": MAX_WAIT_MESSAGE,
                },
            ],
            **billing(0, spot=True),
        )
        return False

    def _checkpoints_in_s3(self, run: TrainingRun) -> set[str]:
        """The checkpoint files already under the job's CheckpointConfig.S3Uri (what it restores)."""
        from airflow_dist_training.storage.location import split_uri

        scheme, bucket, prefix = split_uri(str((run.request.get("CheckpointConfig") or {}).get("S3Uri") or ""))
        if scheme != "s3":
            return set()
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        pages = self.clients("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return {o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", [])}

    def _strike_after_new_checkpoint(self, run: TrainingRun, strike: Any, restored: set[str]) -> None:
        """An armed ``host_failure`` or ``spot_interruption``: strike once a complete checkpoint the job
        wrote itself (not one it restored) is on the hosts' disk (or, with no ``CheckpointConfig``,
        once the job trains). The executor then syncs it to S3, so the run's next job resumes from it."""
        has_checkpoints = bool(run.request.get("CheckpointConfig"))
        while not run.job.done:
            if has_checkpoints:
                dirs = [Path(d["checkpoints"]) for d in run.job.host_dirs().values()]
                struck = any(
                    m.relative_to(d).as_posix() not in restored
                    for d in dirs
                    if d.is_dir()
                    for m in d.rglob("_MANIFEST.json")
                )
            else:
                struck = run.job.describe()["SecondaryStatus"] == "Training"
            if struck:
                log.info(
                    "emulator: %s of training job %s (fault)", getattr(strike, "__name__", "fault"), run.name
                )
                strike(run.name)
                return
            time.sleep(HOST_FAILURE_POLL_SECONDS)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop every running job and wait until its processes are gone."""
        with self._lock:
            runs = list(self.runs.values())
        for run in runs:
            if run.job is not None and not run.done.is_set():
                with contextlib.suppress(Exception):
                    run.job.stop(wait=True)
        deadline = time.monotonic() + timeout
        for run in runs:
            run.done.wait(max(0.0, deadline - time.monotonic()))
