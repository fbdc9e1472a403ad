"""The states of a SageMaker job (training and processing share them), and the neutral
``JobStatus`` every training backend reports. Pure: no Airflow, no boto3.

One definition for hooks, triggers, sensors, operators and the UI. ``MaxRuntimeExceeded`` is a
``SecondaryStatus`` of a Failed/Stopped job, listed so that a status read from either field
counts as terminal and failed.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: A job in these states can still be stopped (``Stopping`` is already on its way out).
STOPPABLE_STATES = frozenset({"InProgress"})
ACTIVE_STATES = STOPPABLE_STATES | {"Stopping"}
SUCCESS_STATES = frozenset({"Completed"})
#: Stopped: by a StopXJob call (ours or the console's); never a success.
STOPPED_STATES = frozenset({"Stopped"})
FAILED_STATES = frozenset({"Failed", "MaxRuntimeExceeded"}) | STOPPED_STATES
TERMINAL_STATES = SUCCESS_STATES | FAILED_STATES


def is_terminal(status: object) -> bool:
    return status in TERMINAL_STATES


class JobPhase(enum.StrEnum):
    """Where a job is, in every backend's terms (a backend maps its own states to these)."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"


ACTIVE_PHASES = frozenset({JobPhase.PENDING, JobPhase.RUNNING, JobPhase.STOPPING})


class AttemptOutcome(enum.StrEnum):
    """How a job ended, for the run's budgets (``checkpoints/resume.decide_retry``)."""

    SUCCEEDED = "succeeded"
    INTERRUPTED = "interrupted"  # spot capacity reclaimed, MaxWait reached while waiting for spot
    CAPACITY = "capacity"  # InsufficientCapacity / CapacityError / ResourceLimitExceeded
    FAILED = "failed"  # a real failure: algorithm error, bad input, OOM, ...


@dataclass(frozen=True)
class JobStatus:
    """One job as a backend reports it: what the training operator decides on, and all it reads.

    A backend builds it from its own record in one place (SageMaker: ``DescribeTrainingJob``);
    ``detail`` is that record, read only by the backend that made it (its ``result`` and ``links``).
    """

    name: str
    phase: JobPhase
    state: str  # the backend's own word for the state, as messages quote it (``Failed``)
    outcome: AttemptOutcome | None = None  # None while the job is active
    reason: str | None = None  # why it failed or stopped, as the backend says it
    stop_requested: bool = False  # Airflow asked for the stop that ended it
    stop_cause: str | None = None  # why, when it was not a kill of its task (``checkpoint-stall``)
    spot: bool = False  # it ran on capacity that can be reclaimed
    detail: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def active(self) -> bool:
        return self.phase in ACTIVE_PHASES
