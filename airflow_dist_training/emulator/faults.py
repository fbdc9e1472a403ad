"""Fault injection for the emulator: spot interruptions, capacity errors, throttling.

Faults are set through the admin call ``POST /_emulator/faults`` (JSON), the CLI flags, or
:meth:`Emulator.inject <airflow_dist_training.emulator.server.Emulator.inject>`:

- ``{"fault": "spot_interruption", "job_name": "..."}``: the running job's hosts are stopped and
  the job ends ``Stopped`` with SecondaryStatus ``MaxWaitTimeExceeded``, as AWS reports a spot job
  whose capacity was reclaimed; the spot-resume path then runs for real;
- ``{"fault": "insufficient_capacity", "count": N}``: the next N training jobs fail while
  ``Starting`` with AWS's ``CapacityError`` reason, before any host runs;
- ``{"fault": "host_failure", "count": N}``: the next N training jobs lose their instances right
  after the first complete checkpoint (a ``_MANIFEST.json``) is written under ``/opt/ml/checkpoints``
  (as soon as they reach ``Training`` without a ``CheckpointConfig``): every host's processes are
  killed, what was written is synced to ``CheckpointConfig.S3Uri`` as SageMaker syncs it, and the
  job ends ``Failed`` with AWS's ``InternalServerError`` reason. ``{"fault": "host_failure",
  "job_name": "..."}`` does that to a running job now. The task's retry then runs for real: its
  next job resumes from the run's checkpoint;
- ``{"fault": "throttle", "share": 0.3}``: that share of SageMaker API calls answers
  ``ThrottlingException`` (HTTP 400), as SageMaker does under load (``share: 0`` turns it off).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

CAPACITY_REASON = (
    "CapacityError: Unable to provision requested ML compute capacity. "
    "Please retry using a different ML instance type. (InsufficientCapacityError, emulator fault)"
)
SPOT_REASON = "Spot instance interruption: the capacity was reclaimed (emulator fault)"
HOST_FAILURE_REASON = (
    "InternalServerError: We encountered an internal error. Please try again. "
    "(the instance of algo-1 failed: emulator fault)"
)


@dataclass
class Faults:
    """The faults armed on one emulator (thread-safe)."""

    throttle_share: float = 0.0
    capacity_failures: int = 0
    host_failures: int = 0
    throttled_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _rng: random.Random = field(default_factory=lambda: random.Random(7), repr=False)

    def take_capacity_failure(self) -> bool:
        with self._lock:
            if self.capacity_failures > 0:
                self.capacity_failures -= 1
                return True
            return False

    def take_host_failure(self) -> bool:
        with self._lock:
            if self.host_failures > 0:
                self.host_failures -= 1
                return True
            return False

    def should_throttle(self) -> bool:
        with self._lock:
            if self.throttle_share > 0 and self._rng.random() < self.throttle_share:
                self.throttled_calls += 1
                return True
            return False
