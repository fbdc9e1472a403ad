"""Fault injection for the emulator: spot interruptions and capacity waits, capacity errors, host failures, throttling.

Set through ``POST /_emulator/faults`` (JSON), the CLI flags, or :meth:`Emulator.inject`; each
fault ends a job as AWS reports it (its status, secondary status and reason), so the task's
resume and retry paths run for real. The faults and their JSON: docs/emulator.md.
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
# SecondaryStatus MaxWaitTimeExceeded, in the words of SageMaker's API reference (DescribeTrainingJob)
MAX_WAIT_MESSAGE = "The job stopped because it exceeded the maximum allowed wait time."
# What launching a spot job says while EC2 has no spot capacity for it
SPOT_CAPACITY_MESSAGE = "Insufficient capacity error from EC2 while launching instances, retrying!"
HOST_FAILURE_REASON = (
    "InternalServerError: We encountered an internal error. Please try again. "
    "(the instance of algo-1 failed: emulator fault)"
)


def max_wait_reason(max_wait: int | None, *, interrupted: bool) -> str:
    """The FailureReason of a managed spot job stopped at its MaxWaitTimeInSeconds."""
    reason = f"MaxWaitTimeExceeded: {MAX_WAIT_MESSAGE} (MaxWaitTimeInSeconds={max_wait})"
    if interrupted:
        reason += f" {SPOT_REASON} and not regained within MaxWaitTimeInSeconds."
    return reason


@dataclass
class Faults:
    """The faults armed on one emulator (thread-safe)."""

    throttle_share: float = 0.0
    capacity_failures: int = 0
    host_failures: int = 0
    # the next N spot jobs lose their capacity right after their first new complete checkpoint
    spot_interruptions: int = 0
    # the next spot job waits this long for spot capacity before its instances launch
    spot_capacity_wait_seconds: float = 0.0
    throttled_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _rng: random.Random = field(default_factory=lambda: random.Random(7), repr=False)

    def take(self, fault: str) -> bool:
        """Use up one armed ``capacity_failures``, ``host_failures`` or ``spot_interruptions``: whether one was armed."""
        with self._lock:
            if getattr(self, fault) > 0:
                setattr(self, fault, getattr(self, fault) - 1)
                return True
            return False

    def take_capacity_wait(self) -> float:
        """Use up the armed wait for spot capacity (seconds; 0: none armed)."""
        with self._lock:
            wait, self.spot_capacity_wait_seconds = self.spot_capacity_wait_seconds, 0.0
            return wait

    def should_throttle(self) -> bool:
        with self._lock:
            if self.throttle_share > 0 and self._rng.random() < self.throttle_share:
                self.throttled_calls += 1
                return True
            return False
