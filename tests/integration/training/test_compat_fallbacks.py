"""Durable reattach without ``task_state_store``/``ResumableJobMixin`` (Airflow before 3.3).

The fallback is simulated on a newer Airflow by putting ``compat.ResumableJobFallback`` in front of
the mixin, and the context has no ``task_state_store`` (as on Airflow 3.1/3.2). On the low-version
venv the operator *is* the fallback, and these tests run the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_sagemaker_training import FakeTrainingLifecycle, make_context, spec_dict

from airflow_dist_training import compat
from airflow_dist_training.operators.training import DistributedTrainingOperator

pytestmark = pytest.mark.integration


if compat.HAS_RESUMABLE_JOBS:

    class FallbackTrainingOperator(compat.ResumableJobFallback, DistributedTrainingOperator):  # type: ignore[misc]
        """The operator as it is built on an Airflow without ``ResumableJobMixin``."""

else:  # the real thing: the operator's mixin already is the fallback
    FallbackTrainingOperator = DistributedTrainingOperator  # type: ignore[misc]


def make_op(**kwargs: Any) -> DistributedTrainingOperator:
    op = FallbackTrainingOperator(
        task_id="train",
        spec=spec_dict(),
        deferrable=False,
        aws_conn_id=None,
        region_name="us-east-1",
        poll_interval=0.01,
        **kwargs,
    )
    op.hook.throttle_base_delay = 0.01
    return op


def context_without_store(run_id: str = "manual__1") -> dict[str, Any]:
    ctx = make_context(run_id)
    del ctx["task_state_store"]  # Airflow 3.1/3.2 has none
    return ctx


@pytest.fixture(autouse=True)
def _fresh_fallback_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "_noted", set())


def task_log(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()  # the task logger (structlog) writes to the console here
    return out + err


def test_crash_between_create_and_persist_then_retry_reattaches_by_name(
    fake: FakeTrainingLifecycle, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.complete_after = None
    name = make_op().submit_job(context_without_store())  # created, then the worker died
    fake.complete_after = 0.0
    task_log(capsys)
    result = make_op().execute(context_without_store())  # the retry
    log = task_log(capsys)
    assert result["job_name"] == name and result["status"] == "Completed"
    assert fake.create_log == [name]
    assert f"Found this run's training job {name}" in log
    fallback_lines = [line for line in log.splitlines() if "Compatibility fallback [durable-reattach]" in line]
    assert len(fallback_lines) == 1
    assert "deterministic job name plus describe-before-create" in fallback_lines[0]


def test_retry_of_a_completed_job_returns_it_and_names_the_fallback_once(
    fake: FakeTrainingLifecycle, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_op().execute(context_without_store())
    again = make_op().execute(context_without_store())
    assert first["job_name"] == again["job_name"]
    assert fake.total_creates == 1
    assert task_log(capsys).count("Compatibility fallback [durable-reattach]") == 1


def test_retry_after_a_failed_job_creates_the_next_generation(fake: FakeTrainingLifecycle) -> None:
    fake.complete_after = None
    name = make_op().submit_job(context_without_store())
    fake.set_status(name, "Failed", failure_reason="AlgorithmError: boom")
    fake.complete_after = 0.0
    result = make_op().execute(context_without_store())
    assert result["job_name"] == f"{name}-r2"
    assert fake.create_log == [name, f"{name}-r2"]


def test_durable_false_does_not_name_the_fallback(
    fake: FakeTrainingLifecycle, capsys: pytest.CaptureFixture[str]
) -> None:
    make_op(durable=False).execute(context_without_store())
    assert "Compatibility fallback" not in task_log(capsys)
    assert fake.total_creates == 1
