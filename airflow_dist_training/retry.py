"""The retry policy of training pipelines (Airflow 3.3 ``retry_policy``).

Bad input and missing permissions fail at once: retrying cannot fix them, and a retry of a
multi-node job costs money. Capacity and account-limit errors are retried later, with a long
delay, instead of being treated like bugs. Everything else follows the task's ``retries``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

CAPACITY_RETRY_DELAY = timedelta(minutes=30)


def training_retry_policy(capacity_retry_delay: timedelta = CAPACITY_RETRY_DELAY) -> Any:
    """The policy, or ``None`` on an Airflow without ``retry_policy`` (before 3.3; logged once).

    ``None`` in a task group's ``default_args`` is harmless there: operators ignore default
    arguments they do not take.
    """
    from airflow_dist_training.compat import FALLBACK_RETRY_POLICY, note_fallback, retry_policy_supported

    if not retry_policy_supported():
        note_fallback(FALLBACK_RETRY_POLICY)
        return None
    from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

    return ExceptionRetryPolicy(
        rules=[
            RetryRule(
                exception="airflow_dist_training.errors.SpecValidationError",
                action=RetryAction.FAIL,
                reason="invalid spec or input: fix it, retrying cannot",
            ),
            RetryRule(
                exception="airflow_dist_training.errors.AwsPermissionError",
                action=RetryAction.FAIL,
                reason="missing IAM permission: grant it, retrying cannot",
            ),
            RetryRule(
                exception="airflow_dist_training.errors.CapacityError",
                action=RetryAction.RETRY,
                retry_delay=capacity_retry_delay,
                reason="no capacity or an account limit: retrying later",
            ),
        ]
    )
