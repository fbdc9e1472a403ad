"""Resume policy, the run's checkpoint location and the spot-interruption budget. Pure.

Resume is scoped to the run (:func:`run_checkpoint_location`): every job of a run (retries, spot
replacements) checkpoints under the run's own prefix, restored into ``/opt/ml/checkpoints`` of
each new job; a new run never resumes another run's (that is ``warm_start``). :func:`decide_retry`
keeps separate budgets for interruptions and real failures, as Ray Train's ``FailureConfig`` does,
and switches to on-demand after N interruptions (``docs/checkpoints.md``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from airflow_dist_training.aws_errors import is_capacity_failure, is_interruption
from airflow_dist_training.errors import SpecValidationError
from airflow_dist_training.job_states import SUCCESS_STATES, AttemptOutcome, JobPhase, JobStatus
from airflow_dist_training.storage.location import join_uri

RESUME_POLICIES: tuple[str, ...] = ("fresh", "latest", "none")


def classify_outcome(
    status: str | None = None, failure_reason: str | None = None, secondary_status: str | None = None
) -> AttemptOutcome:
    """Classify a finished SageMaker attempt from ``DescribeTrainingJob`` fields."""
    if status in SUCCESS_STATES:
        return AttemptOutcome.SUCCEEDED
    if is_capacity_failure(failure_reason, secondary_status):
        return AttemptOutcome.CAPACITY
    if is_interruption(failure_reason, secondary_status):
        return AttemptOutcome.INTERRUPTED
    return AttemptOutcome.FAILED


def resume_cause(ended: JobStatus) -> str:
    """Why a run's next job resumes, from the status of the job that ended before it: ``a spot
    interruption of job X``, ``a failure of job X``, ... (the run's summary says it)."""
    if ended.outcome is AttemptOutcome.INTERRUPTED:
        what = "a spot interruption" if ended.spot else "an interruption"
    elif ended.outcome is AttemptOutcome.CAPACITY:
        what = "a capacity error"
    elif ended.phase is JobPhase.STOPPED:
        what = "a stop"
    else:
        what = "a failure"
    return f"{what} of job {ended.name}"


@dataclass(frozen=True)
class FailureBudget:
    """Separate budgets for interruptions and real failures.

    :param max_failures: real failures tolerated before giving up (Ray's ``max_failures``).
    :param max_interruptions: interruptions/capacity errors tolerated; ``None`` = unlimited.
    :param on_demand_after: switch from spot to on-demand once this many interruptions happened;
        ``None`` = never switch.
    """

    max_failures: int = 0
    max_interruptions: int | None = None
    on_demand_after: int | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.max_failures < 0:
            problems.append(("max_failures", f"must be >= 0, got {self.max_failures}"))
        if self.max_interruptions is not None and self.max_interruptions < 0:
            problems.append(("max_interruptions", f"must be >= 0 or None, got {self.max_interruptions}"))
        if self.on_demand_after is not None and self.on_demand_after < 1:
            problems.append(("on_demand_after", f"must be >= 1 or None, got {self.on_demand_after}"))
        if problems:
            raise SpecValidationError(problems)


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    resume: bool  # start the next attempt from the latest complete checkpoint
    use_spot: bool
    interruptions: int
    failures: int
    reason: str

    def to_xcom(self) -> dict[str, Any]:
        return asdict(self)


def decide_retry(
    outcomes: Sequence[AttemptOutcome | str], budget: FailureBudget, *, spot: bool = True
) -> RetryDecision:
    """Decide what the next attempt does, given all previous attempts' outcomes (oldest first)."""
    parsed = [AttemptOutcome(o) for o in outcomes]
    interruptions = sum(o in (AttemptOutcome.INTERRUPTED, AttemptOutcome.CAPACITY) for o in parsed)
    failures = sum(o is AttemptOutcome.FAILED for o in parsed)
    use_spot = spot and not (budget.on_demand_after is not None and interruptions >= budget.on_demand_after)

    def decision(retry: bool, reason: str) -> RetryDecision:
        return RetryDecision(retry, retry, use_spot, interruptions, failures, reason)

    if not parsed:
        return decision(True, "first attempt")
    if parsed[-1] is AttemptOutcome.SUCCEEDED:
        return RetryDecision(False, False, use_spot, interruptions, failures, "the last attempt succeeded")
    if failures > budget.max_failures:
        return decision(
            False, f"failure budget exhausted: {failures} real failures > max_failures={budget.max_failures}"
        )
    if budget.max_interruptions is not None and interruptions > budget.max_interruptions:
        return decision(
            False,
            f"interruption budget exhausted: {interruptions} interruption{'' if interruptions == 1 else 's'} "
            f"> max_interruptions={budget.max_interruptions}",
        )
    switched = " on on-demand instances" if spot and not use_spot else ""
    return decision(
        True,
        f"resume after {parsed[-1].value} ({interruptions} interruptions, {failures} failures){switched}",
    )


@dataclass(frozen=True)
class RunCheckpoints:
    """Where one run's checkpoints live under the pipeline's checkpoint root."""

    spec: Any  # the TrainingJobSpec with CheckpointConfig pointing at ``run_uri``
    pipeline_uri: str  # the spec's checkpoint root: every run's checkpoints sit below it
    run_uri: str  # this run's (or, for ``none``, this job's) checkpoint location


def run_checkpoint_location(
    spec: Any, policy: str, *, run_key: str, job_name: str, local: bool, base_dir: str | None = None
) -> RunCheckpoints | None:
    """Give a run its own checkpoint location below the spec's checkpoint root (pure).

    ``fresh``/``latest``: ``<root>/<run key>`` (the run's first job name), shared by every retry
    and generation of the run, so SageMaker (or the local launcher) restores the run's own latest
    checkpoint into each new job. ``none``: ``<root>/<job name>``, empty for every job.
    Returns None when the spec has no checkpoint section.
    """
    if policy not in RESUME_POLICIES:
        raise SpecValidationError(
            [("checkpoints.resume", f"must be one of fresh, latest, none; got {policy!r}")]
        )
    checkpoint = getattr(spec, "checkpoint", None)
    if checkpoint is None:
        return None
    leaf = job_name if policy == "none" else run_key
    data = checkpoint.model_dump(mode="json", exclude_unset=True)
    data["s3_uri"] = join_uri(checkpoint.s3_uri, leaf)
    if local and checkpoint.local_uri:
        root = restored_checkpoint_uri(spec, local=True, base_dir=base_dir)
        data["local_uri"] = join_uri(root, leaf)
        pipeline_uri, run_uri = root, data["local_uri"]
    else:
        pipeline_uri, run_uri = checkpoint.s3_uri, data["s3_uri"]
    new_spec = spec.model_copy(update={"checkpoint": type(checkpoint).model_validate(data)})
    return RunCheckpoints(spec=new_spec, pipeline_uri=pipeline_uri, run_uri=run_uri)


def restored_checkpoint_uri(spec: Any, *, local: bool, base_dir: str | None = None) -> str:
    """Where a job of ``spec`` checkpoints, restored into its ``/opt/ml/checkpoints`` when it starts
    (pure): ``checkpoint.s3_uri``, or on the local backend its ``local_uri`` (a relative path is
    against ``base_dir``). The spec must have a checkpoint section."""
    checkpoint = spec.checkpoint
    root = str(checkpoint.local_uri or "") if local else ""
    if not root:
        return str(checkpoint.s3_uri)
    if "://" not in root and not os.path.isabs(root) and base_dir:
        root = os.path.join(base_dir, root)
    return root
