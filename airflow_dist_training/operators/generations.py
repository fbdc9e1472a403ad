"""The run's generations within one try: a job that ends interrupted (spot capacity reclaimed),
or stopped by an earlier try of the task, is replaced by the run's next job, on the run's own
spot budget (``spot.max_interruptions``; ``on_demand_after_interruptions`` leaves spot).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_dist_training.checkpoints.freshness import CHECKPOINT_STALL
from airflow_dist_training.compat import AirflowFailException
from airflow_dist_training.errors import TrainingJobError
from airflow_dist_training.job_states import AttemptOutcome, JobPhase, JobStatus
from airflow_dist_training.spec.training import MAX_RUN_JOBS as MAX_GENERATIONS

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_dist_training.planning import RunJob


class RunGenerationsMixin:
    """The training operator's replacement loop and spot budget."""

    _status: JobStatus | None
    _stopped_here: bool
    _launch: RunJob | None
    _attempt: Callable[[Context], Any]
    _run_job: Callable[..., RunJob]
    log: Any

    def _replacing_interrupted_jobs(self, context: Context, attempt: Callable[[], Any]) -> Any:
        """Run ``attempt``; while its job ends interrupted (spot), or stopped by an earlier try of
        the task (a clear's ``on_kill`` that landed after this try reattached), go on with the
        run's next job.

        ``submit_job`` creates that job (or refuses once the interruption budget is spent), so a
        crash in between is as safe as anywhere else.
        """
        while True:
            try:
                return attempt()
            except TrainingJobError as exc:
                status = self._status
                if status is None or status.name != exc.job_name:
                    raise
                if status.phase is JobPhase.STOPPED and status.stop_cause == CHECKPOINT_STALL:
                    # a retry or a next job would stall the same way: fail, and say why
                    raise AirflowFailException(
                        f"Training job {exc.job_name} was stopped by the run's checkpoint-stall alarm "
                        "(checkpoints.freshness.on_stall: stop; the watch_checkpoints task says why). "
                        "Not retried."
                    ) from exc
                if self._stopped_by_an_earlier_try(status):
                    self.log.warning(
                        "%s The stop was not this try's: an earlier try of the task asked for it when "
                        "it was cleared or killed, after this try had reattached. Going on with the "
                        "run's next job.",
                        exc,
                    )
                elif status.outcome is AttemptOutcome.INTERRUPTED and status.spot:
                    self.log.warning(  # only spot capacity is reclaimed
                        "%s Replacing it with the run's next job, which resumes from the latest complete "
                        "checkpoint (interruptions do not use up the task's retries).",
                        exc,
                    )
                else:
                    raise
                self._status = None
                attempt = partial(self._attempt, context)

    def _log_ended_job(self, ended: JobStatus, next_generation: int) -> None:
        self.log.warning(
            "This run's earlier job %s ended %s%s (%s); starting generation %d.",
            ended.name,
            ended.state,
            f" ({ended.reason})" if ended.reason else "",
            ended.outcome,
            next_generation,
        )

    def _stopped_by_an_earlier_try(self, status: JobStatus) -> bool:
        """A job Airflow stopped (``stop-requested``) though this try, still running, did not: the
        ``on_kill`` of the try that a clear replaced landed after this try reattached to the job."""
        return status.phase is JobPhase.STOPPED and not self._stopped_here and status.stop_requested

    def _next_job_on_demand(self, context: Context, outcomes: list[AttemptOutcome]) -> bool:
        """Apply the spot budget to the run's earlier jobs: refuse, or say whether to leave spot.

        Real failures are bounded by the task's ``retries``, not here.
        """
        from airflow_dist_training.checkpoints.resume import FailureBudget, decide_retry

        if not outcomes:
            return False
        if self._launch is None:
            self._launch = self._run_job(context)  # the run's spec (a task resumed after its trigger)
        spot = self._launch.spec.spot
        if not spot.enabled:
            return False
        budget = FailureBudget(
            max_failures=MAX_GENERATIONS,
            max_interruptions=spot.max_interruptions,
            on_demand_after=spot.on_demand_after_interruptions,
        )
        decision = decide_retry(outcomes, budget, spot=True)
        if not decision.retry:
            raise AirflowFailException(
                f"Not creating another training job for this run: {decision.reason} "
                "(spot.max_interruptions). Raise the budget, or set spot.on_demand_after_interruptions."
            )
        if not decision.use_spot:
            self.log.warning(
                "%d spot interruptions in this run (spot.on_demand_after_interruptions=%d): "
                "the next job runs on on-demand instances.",
                decision.interruptions,
                spot.on_demand_after_interruptions,
            )
        return not decision.use_spot
