"""Is the newest complete checkpoint fresh enough? Pure (times are epoch seconds)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: the stop cause (``TrainingBackend.stop(cause=...)``) of a job its checkpoint-stall alarm stopped
CHECKPOINT_STALL = "checkpoint-stall"


@dataclass(frozen=True)
class Freshness:
    stale: bool
    age_seconds: float
    max_age_seconds: float
    checkpoint_uri: str | None  # newest complete checkpoint, None when there is none yet
    step: int | None
    root: str

    @property
    def message(self) -> str:
        if self.checkpoint_uri is None:
            what = f"no complete checkpoint under {self.root} for {self.age_seconds:.0f}s (since the run started)"
        else:
            what = (
                f"newest complete checkpoint under {self.root} is step {self.step} "
                f"({self.checkpoint_uri}), written {self.age_seconds:.0f}s ago"
            )
        verdict = "exceeds" if self.stale else "within"
        return f"{what}; {verdict} max_age={self.max_age_seconds:.0f}s"

    def stall_alarm(self, job_name: str, on_stall: str) -> str:
        """The watcher task's failure message: what stalled, for how long, against which threshold."""
        if self.checkpoint_uri is None:
            since = f"no complete checkpoint under {self.root} since it started training {self.age_seconds:.0f}s ago"
        else:
            since = (
                f"its newest complete checkpoint is step {self.step} ({self.checkpoint_uri}), written "
                f"{self.age_seconds:.0f}s ago"
            )
        then = "the job is being stopped" if on_stall == "stop" else "the job is left running"
        return (
            f"Checkpoint stall: training job {job_name} has written no new complete checkpoint for "
            f"{self.age_seconds:.0f}s, over checkpoint freshness max_age_seconds={self.max_age_seconds:g}: "
            f"{since}. on_stall={on_stall}: {then}."
        )

    def to_xcom(self) -> dict[str, Any]:
        return {**asdict(self), "age_seconds": round(self.age_seconds, 3)}


def assess_freshness(
    *,
    root: str,
    now: float,
    max_age_seconds: float,
    started_at: float,
    latest_modified: float | None,
    latest_uri: str | None = None,
    latest_step: int | None = None,
) -> Freshness:
    """Stale when the newest complete checkpoint (or, with none, the watch start) is older than max_age.

    A checkpoint written before the watch started still counts (a resumed job's seed), but the
    baseline is never earlier than ``started_at``: the first checkpoint gets ``max_age`` from the start.
    """
    baseline = started_at if latest_modified is None else max(latest_modified, started_at)
    age = max(0.0, now - baseline)
    return Freshness(
        stale=age > max_age_seconds,
        age_seconds=age,
        max_age_seconds=float(max_age_seconds),
        checkpoint_uri=latest_uri,
        step=latest_step,
        root=root,
    )


def training_started_at(description: Mapping[str, Any]) -> float | None:
    """When a job began training (``TrainingStartTime``, epoch seconds), None before: provisioning
    and downloading write no checkpoint, so the freshness clock has not started."""
    started = description.get("TrainingStartTime")
    if isinstance(started, dt.datetime):
        return (started if started.tzinfo else started.replace(tzinfo=dt.UTC)).timestamp()
    if isinstance(started, int | float):
        return float(started)
    return None


def job_freshness(
    description: Mapping[str, Any],
    *,
    root: str,
    now: float,
    max_age_seconds: float,
    latest_modified: float | None,
    latest_uri: str | None = None,
    latest_step: int | None = None,
) -> Freshness | None:
    """A running job's checkpoint freshness, None while it has not started training.

    The clock starts at ``TrainingStartTime`` (a resumed job's earlier checkpoints do not make a
    slow start stale) and restarts at each newer complete checkpoint.
    """
    started = training_started_at(description)
    if started is None:
        return None
    return assess_freshness(
        root=root,
        now=now,
        max_age_seconds=max_age_seconds,
        started_at=started,
        latest_modified=latest_modified,
        latest_uri=latest_uri,
        latest_step=latest_step,
    )
