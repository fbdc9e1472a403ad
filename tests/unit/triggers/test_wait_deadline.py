"""When a deferred wait ends (``triggers.base.wait_deadline``): the earlier of the task's limits."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from airflow_dist_training.triggers.base import wait_deadline


def test_no_limit_no_deadline() -> None:
    assert wait_deadline(None, None, None) == (None, None)


def test_the_execution_timeout_counts_from_the_try_start_and_the_earlier_limit_wins() -> None:
    started = datetime.now(UTC) - timedelta(seconds=100)
    deadline, reason = wait_deadline(3600, timedelta(seconds=300), started)
    assert reason == "execution_timeout=300s"
    assert deadline is not None and abs(deadline - (started.timestamp() + 300)) < 1e-6
    deadline, reason = wait_deadline(60, timedelta(seconds=300), started)
    assert reason == "max_wait_seconds=60" and deadline is not None and deadline <= time.time() + 60


def test_an_execution_timeout_without_a_start_counts_from_now() -> None:
    before = time.time()
    deadline, reason = wait_deadline(None, timedelta(minutes=1), None)
    assert reason == "execution_timeout=60s" and deadline is not None and before + 60 <= deadline <= time.time() + 60
