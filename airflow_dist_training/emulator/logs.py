"""Job output into CloudWatch Logs, one stream per host, as SageMaker writes it.

Training: group ``/aws/sagemaker/TrainingJobs``; processing: ``/aws/sagemaker/ProcessingJobs``;
stream ``<job>/algo-N-<epoch>``. Lines are buffered and sent with ``PutLogEvents`` through the
endpoint's own Logs API (moto), so every reader (the triggers, the hook, a user's boto3) sees them.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

TRAINING_LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PROCESSING_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"
_HOST_LINE = re.compile(r"^\[(algo-\d+)\] ?(.*)$", re.S)


class JobLogs:
    """The log streams of one job. ``add`` takes an executor line (``[algo-N] text`` or other)."""

    def __init__(self, logs_client: Any, group: str, job_name: str, default_host: str = "algo-1") -> None:
        self.client = logs_client
        self.group = group
        self.job_name = job_name
        self.default_host = default_host
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
        m = _HOST_LINE.match(line)
        host, text = (m.group(1), m.group(2)) if m else (self.default_host, line)
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
