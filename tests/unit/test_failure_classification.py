"""Which ended jobs fail the task at once (the script's fault) and which the task retries."""

from __future__ import annotations

from airflow_dist_training.errors import (
    CapacityError,
    TrainingJobError,
    TrainingScriptError,
    training_job_error,
)


def _error(status: str, reason: str | None) -> TrainingJobError:
    return training_job_error("ended", job_name="j", status=status, failure_reason=reason)


def test_an_algorithm_error_is_the_scripts_fault() -> None:
    error = _error("Failed", 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "ValueError: boom"')
    assert isinstance(error, TrainingScriptError)


def test_a_process_killed_by_sigkill_is_retried_not_failed_at_once() -> None:
    # the toolkit's text for an OOM kill or a reclaimed host: a retry from the checkpoint may succeed
    reason = (
        "AlgorithmError: ExecuteUserScriptError:\nExitCode 137\nErrorMessage \"\"\n"
        'ExtraInfo "OutOfMemory: Process killed by SIGKILL (signal 9)"'
    )
    error = _error("Failed", reason)
    assert type(error) is TrainingJobError and error.failure_reason == reason


def test_infrastructure_and_stopped_jobs_are_retried() -> None:
    assert type(_error("Failed", "InternalServerError: We encountered an internal error.")) is TrainingJobError
    assert type(_error("Stopped", "AlgorithmError: stopped mid-run")) is TrainingJobError
    assert not isinstance(_error("Failed", None), (TrainingScriptError, CapacityError))
