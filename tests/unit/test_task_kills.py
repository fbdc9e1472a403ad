"""An operator's ``on_kill`` (``task_kills.stop_on_worker_kill``): stop the job unless the task comes back."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from airflow_dist_training.task_kills import stop_on_worker_kill

LOG = logging.getLogger("on_kill")


def test_a_kill_outside_a_task_runner_stops_the_job_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    stopped: list[str] = []
    with caplog.at_level("INFO"):
        stop_on_worker_kill(None, "job-1", lambda: stopped.append("job-1"), LOG, what="training job")
    assert stopped == ["job-1"]
    assert "Task killed: on_kill was called outside a task runner; stopping job-1." in caplog.text


def test_a_stop_that_fails_is_logged_and_on_kill_does_not_raise(caplog: pytest.LogCaptureFixture) -> None:
    def stop() -> Any:
        raise RuntimeError("throttled")

    with caplog.at_level("INFO"):
        stop_on_worker_kill(None, "tune-1", stop, LOG, what="tuning job")
    assert "Could not stop tuning job tune-1: throttled" in caplog.text


def test_a_try_that_comes_back_leaves_its_job_running(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_dist_training import task_kills

    monkeypatch.setattr(task_kills, "worker_kill_case", lambda ti: task_kills.cancel_case("up_for_retry"))
    stopped: list[str] = []
    with caplog.at_level("INFO"):
        stop_on_worker_kill(object(), "job-2", lambda: stopped.append("job-2"), LOG, what="training job")
    assert stopped == []
    assert "Task killed: the task instance failed with retries left" in caplog.text
    assert "job-2 is left running." in caplog.text
