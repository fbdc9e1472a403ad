"""Fault injection for the emulator: spot interruptions, capacity errors, host failures, throttling.

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

    def take(self, fault: str) -> bool:
        """Use up one armed ``capacity_failures`` or ``host_failures``: whether one was armed."""
        with self._lock:
            if getattr(self, fault) > 0:
                setattr(self, fault, getattr(self, fault) - 1)
                return True
            return False

    def should_throttle(self) -> bool:
        with self._lock:
            if self.throttle_share > 0 and self._rng.random() < self.throttle_share:
                self.throttled_calls += 1
                return True
            return False
