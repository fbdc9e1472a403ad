"""Pure unit tests: serialization, terminal-state mapping, error classification, registry."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from airflow_dist_training.triggers.polling import Backoff, get_poller, is_throttling, is_transient
from airflow_dist_training.triggers.training import TrainingJobTrigger, _expected_hosts

CLASSPATH = "airflow_dist_training.triggers.training.TrainingJobTrigger"
KWARGS: dict[str, Any] = {
    "job_name": "llama-ft-2024-06-01",
    "aws_conn_id": "aws_prod",
    "region_name": "eu-west-1",
    "poll_interval": 12.5,
    "max_wait_seconds": 7200,
    "stream_logs": False,
    "deadline": 1_800_000_000.0,
    "deadline_reason": "execution_timeout=3600s",
}


def client_error(code: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op"
    )


def test_defaults_have_no_cap() -> None:
    classpath, kwargs = TrainingJobTrigger("j").serialize()
    assert classpath == CLASSPATH
    assert kwargs == {
        "job_name": "j",
        "aws_conn_id": "aws_default",
        "region_name": None,
        "poll_interval": 30,
        "max_wait_seconds": None,
        "stream_logs": True,
        "deadline": None,
        "deadline_reason": None,
    }


def test_serialize_round_trip() -> None:
    classpath, kwargs = TrainingJobTrigger(**KWARGS).serialize()
    assert (classpath, kwargs) == (CLASSPATH, KWARGS)
    assert TrainingJobTrigger(**kwargs).serialize() == (CLASSPATH, KWARGS)


def test_db_faithful_round_trip(airflow_db: Path) -> None:
    """Trigger row -> DB (encrypted kwargs) -> BaseSerialization -> TriggerRunner class lookup."""
    from airflow.jobs.triggerer_job_runner import TriggerRunner
    from airflow.models.trigger import Trigger
    from airflow.serialization.serialized_objects import BaseSerialization
    from airflow.utils.session import create_session

    row = Trigger.from_object(TrainingJobTrigger(**KWARGS))
    with create_session() as session:
        session.add(row)
        session.flush()
        trigger_id = row.id
    with create_session() as session:
        stored = session.get(Trigger, trigger_id)
        assert stored is not None
        classpath, kwargs = stored.classpath, stored.kwargs
        session.delete(stored)
    kwargs = BaseSerialization.deserialize(BaseSerialization.serialize(kwargs))
    rebuilt = TriggerRunner().get_trigger_by_classpath(classpath)(**kwargs)
    assert isinstance(rebuilt, TrainingJobTrigger)
    assert rebuilt.serialize() == (CLASSPATH, KWARGS)


@pytest.mark.parametrize(
    ("desc", "status", "reason"),
    [
        ({"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}, "success", None),
        (
            {"TrainingJobStatus": "Failed", "SecondaryStatus": "Failed", "FailureReason": "OOM"},
            "failed",
            "OOM",
        ),
        (
            {
                "TrainingJobStatus": "Stopped",
                "SecondaryStatus": "MaxRuntimeExceeded",
                "FailureReason": "limit",
            },
            "failed",
            "limit",
        ),
        (
            {"TrainingJobStatus": "Stopped", "SecondaryStatus": "MaxRuntimeExceeded"},
            "failed",
            "MaxRuntimeExceeded",
        ),
        ({"TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"}, "stopped", None),
    ],
)
def test_terminal_mapping(desc: dict[str, Any], status: str, reason: str | None) -> None:
    payload = TrainingJobTrigger("j")._terminal_event(desc).payload
    assert set(payload) == {"status", "job_name", "job_status", "failure_reason", "message"}
    assert payload["status"] == status
    assert payload["job_status"] == desc["TrainingJobStatus"]
    assert payload["failure_reason"] == reason


def test_error_classification() -> None:
    assert is_transient(client_error("ThrottlingException")) and is_throttling(
        client_error("ThrottlingException")
    )
    assert is_transient(client_error("InternalFailure", 500))
    assert is_transient(client_error("Whatever", 503))
    assert is_transient(EndpointConnectionError(endpoint_url="https://x"))
    assert is_transient(TimeoutError())
    assert not is_transient(client_error("ValidationException"))
    assert not is_transient(client_error("AccessDeniedException"))
    assert not is_transient(ValueError("bug"))


def test_backoff_grows_and_is_capped() -> None:
    b = Backoff(1.0, 8.0)
    delays = [b.failure() for _ in range(10)]
    assert all(1.0 <= d <= 8.0 for d in delays)


def test_expected_hosts() -> None:
    assert _expected_hosts({"ResourceConfig": {"InstanceCount": 64}}) == 64
    assert (
        _expected_hosts({"ResourceConfig": {"InstanceGroups": [{"InstanceCount": 2}, {"InstanceCount": 3}]}})
        == 5
    )
    assert _expected_hosts({}) == 1


def test_registry_is_per_loop_connection_and_region() -> None:
    async def pollers() -> tuple[Any, Any, Any, Any]:
        return (
            get_poller("a", "us-east-1"),
            get_poller("a", "us-east-1"),
            get_poller("b", "us-east-1"),
            get_poller("a", "eu-west-1"),
        )

    p1, p2, p3, p4 = asyncio.run(pollers())
    assert p1 is p2 and p1 is not p3 and p1 is not p4
    q1, *_ = asyncio.run(pollers())
    assert q1 is not p1  # a new event loop gets its own poller


def test_import_and_construct_without_aws_sdk() -> None:
    """Parse-time lightness: importing and building the trigger loads no boto3/botocore/aiobotocore."""
    import subprocess
    import sys

    code = (
        "import sys; from airflow_dist_training.triggers.training import TrainingJobTrigger; "
        "TrainingJobTrigger('j').serialize(); "
        "print(sorted(m for m in ('boto3', 'botocore', 'aiobotocore') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_poller_polls_faster_near_a_completion_only_while_the_listing_is_one_page() -> None:
    from airflow_dist_training.triggers.polling import JobWatch, TrainingJobPoller, _JobState

    poller = TrainingJobPoller(None, "us-east-1")
    state = _JobState(description={"TrainingJobStatus": "InProgress", "SecondaryStatus": "Uploading"})
    state.watches.add(JobWatch(poller, "job", interval=30.0))
    poller._jobs["job"] = state
    poller._last_list_pages = 1  # AWS: LastModifiedTimeAfter filters first, one page
    assert poller.next_interval() == 15.0
    poller._last_list_pages = 10  # a listing that pages through 1,000 jobs: halving doubles the calls
    assert poller.next_interval() == 30.0
