"""Resume policy resolution and the interruption budget (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_dist_training.checkpoints.resume import (
    AttemptOutcome,
    FailureBudget,
    classify_outcome,
    decide_retry,
)
from airflow_dist_training.errors import SpecValidationError


def test_classify_outcome():
    assert classify_outcome("Completed") is AttemptOutcome.SUCCEEDED
    assert (
        classify_outcome("Failed", "CapacityError: Unable to provision requested ML compute capacity.")
        is AttemptOutcome.CAPACITY
    )
    assert classify_outcome("Stopped", None, "MaxWaitTimeExceeded") is AttemptOutcome.INTERRUPTED
    assert classify_outcome("Failed", "AlgorithmError: CUDA out of memory") is AttemptOutcome.FAILED


def test_interruptions_do_not_use_up_the_failure_budget_and_switch_to_on_demand():
    budget = FailureBudget(max_failures=1, max_interruptions=3, on_demand_after=2)
    d = decide_retry(["interrupted"], budget)
    assert (d.retry, d.resume, d.use_spot) == (True, True, True)
    d = decide_retry(["interrupted", "capacity"], budget)
    assert (d.retry, d.use_spot, d.reason) == (
        True,
        False,
        "resume after capacity (2 interruptions, 0 failures) on on-demand instances",
    )
    d = decide_retry(["interrupted", "failed"], budget)
    assert d.retry and d.failures == 1
    d = decide_retry(["failed", "interrupted", "failed"], budget)
    assert not d.retry and d.reason == "failure budget exhausted: 2 real failures > max_failures=1"
    d = decide_retry(["interrupted"] * 4, budget)
    assert not d.retry and d.reason == "interruption budget exhausted: 4 interruptions > max_interruptions=3"
    assert not decide_retry(["interrupted", "succeeded"], budget).retry
    with pytest.raises(SpecValidationError, match="on_demand_after: must be >= 1 or None, got 0"):
        FailureBudget(on_demand_after=0)


@given(
    outcomes=st.lists(st.sampled_from(["interrupted", "capacity", "failed"]), max_size=12),
    max_failures=st.integers(0, 3),
    on_demand_after=st.one_of(st.none(), st.integers(1, 4)),
)
def test_budget_properties(outcomes, max_failures, on_demand_after):
    d = decide_retry(outcomes, FailureBudget(max_failures=max_failures, on_demand_after=on_demand_after))
    failures = outcomes.count("failed")
    assert d.retry == (failures <= max_failures)  # unlimited interruptions
    assert d.resume == d.retry
    assert d.use_spot == (on_demand_after is None or d.interruptions < on_demand_after)


def test_resume_cause_names_what_ended_the_run_s_earlier_job():
    from airflow_dist_training.checkpoints.resume import resume_cause as cause_of
    from airflow_dist_training.hooks.training import job_status_from_description

    def resume_cause(description: dict[str, object]) -> str:  # of the job's status, as its backend reports it
        return cause_of(job_status_from_description(description))

    spot = {
        "TrainingJobName": "j-1",
        "TrainingJobStatus": "Stopped",
        "SecondaryStatus": "MaxWaitTimeExceeded",
    }
    assert resume_cause({**spot, "EnableManagedSpotTraining": True}) == "a spot interruption of job j-1"
    assert resume_cause(spot) == "an interruption of job j-1"
    failed = {
        "TrainingJobName": "j-2",
        "TrainingJobStatus": "Failed",
        "FailureReason": "InternalServerError: x",
    }
    assert resume_cause(failed) == "a failure of job j-2"
    assert resume_cause({"TrainingJobName": "j-3", "TrainingJobStatus": "Stopped"}) == "a stop of job j-3"
    capacity = {
        **failed,
        "FailureReason": "CapacityError: Unable to provision requested ML compute capacity.",
    }
    assert resume_cause(capacity) == "a capacity error of job j-2"
