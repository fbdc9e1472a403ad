"""Job output into CloudWatch, as SageMaker writes it.

Logs: one stream per host (``<job>/algo-N-<epoch>``) in the job kind's group, sent with
``PutLogEvents`` through the endpoint's own Logs API (moto), so every reader (the triggers, the
hook, a user's boto3) sees them. They hold what the job's processes print, as on SageMaker; the
executor's own lines (``[local] ...``: folders, interpreters, commands) go to the endpoint's log
(logger ``airflow_dist_training.emulator``), and to a ``<job>/emulator-debug-<epoch>`` stream only
when the endpoint runs with ``debug_stream``. Metrics: each point a training job's ``MetricDefinitions`` parse
from a host's line goes to ``PutMetricData`` (namespace ``/aws/sagemaker/TrainingJobs``, dimension
``Host=<job>/algo-N``), what the Training view and SageMaker's ``TrainingJobAnalytics`` read back.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from airflow_dist_training.local.metrics import MetricPoint
from airflow_dist_training.ui.sagemaker_source import NAMESPACE as METRICS_NAMESPACE

TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PROCESSING_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"
_HOST_LINE = re.compile(r"^\[(algo-\d+)\] ?(.*)$", re.S)
DEBUG_STREAM = "emulator-debug"
log = logging.getLogger("airflow_dist_training.emulator")


class JobLogs:
    """The log streams of one job. ``add`` takes an executor line (``[algo-N] text`` or other)."""

    def __init__(self, logs_client: Any, group: str, job_name: str, debug_stream: bool = False) -> None:
        self.client = logs_client
        self.group = group
        self.job_name = job_name
        self.debug_stream = debug_stream
        self.epoch = int(time.time())
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._streams: set[str] = set()
        self._lock = threading.Lock()
        try:
            logs_client.create_log_group(logGroupName=group)
        except Exception as exc:
            if "ResourceAlreadyExists" not in type(exc).__name__ + str(exc):
                raise

    def stream_name(self, host: str) -> str:
        return f"{self.job_name}/{host}-{self.epoch}"

    def add(self, line: str) -> None:
        """A host's line (``[algo-N] text``) to its stream; any other line is the executor's own."""
        m = _HOST_LINE.match(line)
        if m is None:
            log.info("%s %s: %s", self.group.rsplit("/", 1)[-1], self.job_name, line)
            if not self.debug_stream:
                return
        host, text = (m.group(1), m.group(2)) if m else (DEBUG_STREAM, line)
        with self._lock:
            self._pending.setdefault(host, []).append(
                {"timestamp": int(time.time() * 1000), "message": text or " "}
            )

    def ensure_stream(self, host: str) -> None:
        name = self.stream_name(host)
        if name in self._streams:
            return
        try:
            self.client.create_log_stream(logGroupName=self.group, logStreamName=name)
        except Exception as exc:
            if "ResourceAlreadyExists" not in type(exc).__name__ + str(exc):
                raise
        self._streams.add(name)

    def flush(self) -> int:
        with self._lock:
            pending, self._pending = self._pending, {}
        sent = 0
        for host, events in pending.items():
            self.ensure_stream(host)
            for i in range(0, len(events), 5000):
                batch = events[i : i + 5000]
                self.client.put_log_events(
                    logGroupName=self.group, logStreamName=self.stream_name(host), logEvents=batch
                )
                sent += len(batch)
        return sent


class JobMetrics:
    """The CloudWatch metrics of one training job. ``publish`` sends parsed points."""

    BATCH = 500  # PutMetricData takes up to 1,000 values a call

    def __init__(self, cloudwatch_client: Any, job_name: str) -> None:
        self.client = cloudwatch_client
        self.job_name = job_name
        self.sent = 0  # how many of the job's points are published

    def publish(self, points: Sequence[MetricPoint]) -> int:
        data = [
            {
                "MetricName": p.name,
                "Dimensions": [{"Name": "Host", "Value": f"{self.job_name}/{p.host}"}],
                "Timestamp": dt.datetime.fromtimestamp(p.timestamp, dt.UTC),
                "Value": p.value,
            }
            for p in points
        ]
        for i in range(0, len(data), self.BATCH):
            self.client.put_metric_data(Namespace=METRICS_NAMESPACE, MetricData=data[i : i + self.BATCH])
        self.sent += len(data)
        return len(data)
