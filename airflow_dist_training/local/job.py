"""The handle of one local training job (``describe()``, logs, host folders, stop, result; see
``local/executor.py``). The job runs on its own thread, supervised by ``supervisor.RunSupervisor``."""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Any

from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.local import hosts as nshosts
from airflow_dist_training.local.metrics import MetricPoint
from airflow_dist_training.local.request_plan import JobOptions, RequestPlan
from airflow_dist_training.local.store import RequestStore
from airflow_dist_training.local.supervisor import FAILURE_REASON_LIMIT, RunSupervisor
from airflow_dist_training.results import TrainingResult

LogFn = Callable[[str], None]
# the keys of the request that DescribeTrainingJob echoes
_ECHOED_KEYS = (
    "AlgorithmSpecification",
    "RoleArn",
    "HyperParameters",
    "InputDataConfig",
    "OutputDataConfig",
    "ResourceConfig",
    "StoppingCondition",
    "CheckpointConfig",
    "Environment",
    "VpcConfig",
    "EnableNetworkIsolation",
    "EnableManagedSpotTraining",
    "RetryStrategy",
    "TensorBoardOutputConfig",
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _parse(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


class LocalTrainingJob:
    """The handle of one job started by :meth:`LocalExecutor.start` (thread-safe)."""

    def __init__(self, rp: RequestPlan, store: RequestStore, options: JobOptions, log: LogFn | None) -> None:
        self.name = rp.plan.job_name
        self.arn = rp.job_arn
        self.job_dir = rp.plan.job_dir
        self.request = rp.request
        self.plan = rp
        self.store = store
        self.created = _now()
        self._lines: collections.deque[str] = collections.deque(maxlen=20000)
        self._user_log = log
        self._run = RunSupervisor(rp, store, options, self._log)
        self._result: TrainingResult | None = None
        self._error: TrainingJobError | None = None
        self._ended: dt.datetime | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"local-job-{self.name}", daemon=True)

    def _log(self, line: str) -> None:
        self._lines.append(line)
        if self._user_log is not None:
            self._user_log(line)

    def _main(self) -> None:
        try:
            if warning := nshosts.warn_fallback_once(self._run.rp.isolation):  # None with namespaces
                self._log(f"[local] WARNING {warning}")
            self._result = self._run.run()
        except TrainingJobError as exc:
            self._error = exc
        except BaseException as exc:  # a bug or an I/O error: the job fails with it, never hangs
            self._error = TrainingJobError(
                f"Local training job {self.name} failed: {type(exc).__name__}: {exc}",
                job_name=self.name,
                status="Failed",
                failure_reason=f"InternalServerError: {type(exc).__name__}: {exc}"[:FAILURE_REASON_LIMIT],
            )
            with contextlib.suppress(Exception):
                self._run.transition("Failed", str(exc))
        finally:
            with contextlib.suppress(Exception):
                self._run.close()
            self._ended = _now()
            self._done.set()

    # -- public API
    def stop(self, grace_seconds: float | None = None, *, wait: bool = False) -> None:
        """Stop the job as SageMaker does (SIGTERM to each host's entrypoint, SIGKILL after the grace period).

        Returns at once, unless ``wait``: then once every host process is gone."""
        if self._done.is_set():
            return
        if wait:
            self._run.stop(grace_seconds)
            return
        threading.Thread(target=self._run.stop, args=(grace_seconds,), daemon=True).start()
        self._run.stop_requested.set()

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the job to end (or ``timeout``) and return :meth:`describe`."""
        self._done.wait(timeout)
        return self.describe()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def logs(self, host: str | None = None) -> list[str]:
        """Output lines so far: one host's (without the ``[algo-N]`` prefix), or all (with it)."""
        lines = list(self._lines)
        if host is None:
            return lines
        prefix = f"[{host}] "
        return [line[len(prefix) :] for line in lines if line.startswith(prefix)]

    def metric_points(self, start: int = 0) -> list[MetricPoint]:
        """The points parsed so far from the hosts' output lines by ``MetricDefinitions``, from the
        ``start``-th on (each with its host and the time its line was seen)."""
        return list(self._run.metrics.series[start:])

    def host_dirs(self) -> dict[str, dict[str, str]]:
        """Each host's ``/opt/ml`` folder and its model, output and checkpoint folders."""
        return {
            hp.host: {
                "opt_ml": str(hp.layout.base),
                "model": str(hp.layout.model_dir),
                "output": str(hp.layout.output_dir),
                "checkpoints": str(hp.layout.checkpoint_dir),
            }
            for hp in self._run.plan.host_plans
        }

    def result(self) -> TrainingResult:
        """The XCom result of a Completed job; raises ``TrainingJobError`` otherwise (waits for the end)."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def _statuses(self, secondary: str) -> tuple[str, str, str | None]:
        """(TrainingJobStatus, SecondaryStatus, FailureReason) as SageMaker reports them."""
        run = self._run
        if not self._done.is_set():
            if run.stop_requested.is_set():
                return "Stopping", "Stopping", None
            return "InProgress", secondary, None
        if self._error is None:
            return "Completed", secondary, None
        status = self._error.status if self._error.status in ("Failed", "Stopped") else "Failed"
        if run.max_runtime_exceeded:
            return status, "MaxRuntimeExceeded", self._error.failure_reason
        if status == "Stopped":
            return status, "Stopped", None
        return status, "Failed", self._error.failure_reason

    def describe(self) -> dict[str, Any]:
        """A ``DescribeTrainingJob``-shaped dict (datetimes as ``datetime``, like boto3)."""
        run = self._run
        timeline = list(run.timeline)
        status, secondary, failure = self._statuses(timeline[-1]["status"] if timeline else "Starting")
        transitions = [
            {
                "Status": t["status"],
                "StartTime": _parse(t["start"]),
                **({"EndTime": _parse(t["end"])} if t["end"] else {}),
                "StatusMessage": t["message"],
            }
            for t in timeline
        ]
        now = _now()
        metrics = [
            {"MetricName": k, "Value": float(v), "Timestamp": self._ended or now}
            for k, v in sorted(run.metrics.final.items())
        ]
        desc: dict[str, Any] = {
            "TrainingJobName": self.name,
            "TrainingJobArn": self.arn,
            "TrainingJobStatus": status,
            "SecondaryStatus": secondary,
            "SecondaryStatusTransitions": transitions,
            "CreationTime": self.created,
            "LastModifiedTime": self._ended or now,
            "FinalMetricDataList": metrics,
            "ModelArtifacts": {"S3ModelArtifacts": self.plan.model_uri},
        }
        desc.update({key: self.request[key] for key in _ECHOED_KEYS if key in self.request})
        if run.training_started is not None:
            desc["TrainingStartTime"] = dt.datetime.fromtimestamp(run.training_started, dt.UTC)
        if self._done.is_set():
            desc["TrainingEndTime"] = self._ended
            if run.training_started is not None:
                seconds = int((run.training_ended or time.time()) - run.training_started)
                desc["TrainingTimeInSeconds"] = seconds
                desc["BillableTimeInSeconds"] = 0  # nothing is billed locally
        if failure:
            desc["FailureReason"] = failure
        return desc
