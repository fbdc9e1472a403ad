"""Emulator pieces that need no server: paths, the /opt/ml mapping, log stream naming, fault statuses."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_dist_training.emulator.faults import HOST_FAILURE_REASON
from airflow_dist_training.emulator.logs import JobLogs
from airflow_dist_training.emulator.processing import ProcessingRun
from airflow_dist_training.emulator.server import Emulator
from airflow_dist_training.emulator.training import TrainingRun


def test_a_relative_root_is_made_absolute(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    assert Emulator(root=".adt-demo/emulator").root == tmp_path / ".adt-demo" / "emulator"


def test_opt_ml_paths_map_once_into_the_job_folder(tmp_path: Path) -> None:
    run = ProcessingRun(
        record=object(), request={"ProcessingJobName": "p"}, job_dir=tmp_path / "p", logs=None
    )  # type: ignore[arg-type]
    base = tmp_path / "p" / "opt" / "ml"
    assert run.container.local("/opt/ml/processing/input/code/x.py") == f"{base}/processing/input/code/x.py"
    assert run.container.local("--out=/opt/ml/processing/out") == f"--out={base}/processing/out"
    assert run.container.local("/opt/mlx") == "/opt/mlx"


class _Logs:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, list[str]]] = []

    def create_log_group(self, **_: Any) -> None: ...

    def create_log_stream(self, **_: Any) -> None: ...

    def put_log_events(self, logGroupName: str, logStreamName: str, logEvents: list[dict[str, Any]]) -> None:
        self.events.append((logGroupName, logStreamName, [e["message"] for e in logEvents]))


def test_one_stream_per_host_named_like_sagemaker(caplog: pytest.LogCaptureFixture) -> None:
    client = _Logs()
    logs = JobLogs(client, "/aws/sagemaker/TrainingJobs", "job-1")
    logs.add("[algo-2] epoch=0 loss=1.0")
    with caplog.at_level("INFO", logger="airflow_dist_training.emulator"):
        logs.add("[local] preparing 2 simulated host(s) under /tmp/x")  # the executor's: the endpoint's log
    logs.flush()
    streams = {stream: msgs for _, stream, msgs in client.events}
    assert streams == {f"job-1/algo-2-{logs.epoch}": ["epoch=0 loss=1.0"]}
    assert "TrainingJobs job-1: [local] preparing 2 simulated host(s) under /tmp/x" in caplog.messages


def test_executor_lines_reach_a_debug_stream_only_when_asked() -> None:
    client = _Logs()
    logs = JobLogs(client, "/aws/sagemaker/TrainingJobs", "job-1", debug_stream=True)
    logs.add("[local] launching 2 host(s)")
    logs.flush()
    assert [(s, m) for _, s, m in client.events] == [
        (f"job-1/emulator-debug-{logs.epoch}", ["[local] launching 2 host(s)"])
    ]


def test_billable_time_is_the_training_time_less_the_spot_saving() -> None:
    from airflow_dist_training.emulator.training import SPOT_SAVINGS, billing

    assert billing(100, spot=False) == {"training_time_in_seconds": 100, "billable_time_in_seconds": 100}
    spot = billing(100, spot=True)
    assert (
        spot["billable_time_in_seconds"] == round(100 * (1 - SPOT_SAVINGS)) < spot["training_time_in_seconds"]
    )
    assert billing(1, spot=True)["billable_time_in_seconds"] == 1  # billed by the second, at least one


def _executor_view(status: str, secondary: str, reason: str | None = None) -> dict[str, Any]:
    """What the local executor describes for a job (the emulator copies it onto moto's record)."""
    t0 = dt.datetime(2026, 12, 1, 12, 0, 0)
    transitions = [
        {"Status": "Starting", "StartTime": t0, "EndTime": t0, "StatusMessage": "Preparing"},
        {"Status": "Training", "StartTime": t0, "EndTime": t0, "StatusMessage": "Launching"},
        {"Status": secondary, "StartTime": t0, "StatusMessage": reason or secondary},
    ]
    desc: dict[str, Any] = {
        "TrainingJobStatus": status,
        "SecondaryStatus": secondary,
        "SecondaryStatusTransitions": transitions,
    }
    if reason:
        desc["FailureReason"] = reason
    return desc


def test_a_host_failure_is_reported_as_aws_does_whatever_the_processes_did() -> None:
    """The ``host_failure`` fault: never ``Stopping``/``Stopped`` (nobody asked for a stop), and a job
    whose processes had finished before the fault struck still ends ``Failed`` with the reason."""
    run = TrainingRun(SimpleNamespace(), {"TrainingJobName": "job-1"}, logs=None, metrics=None)  # type: ignore[arg-type]
    run.host_failed = True
    run.apply(_executor_view("Stopping", "Stopping"))
    assert (run.record.training_job_status, run.record.secondary_status) == ("InProgress", "Training")
    assert run.record.failure_reason is None
    for status, secondary in (("Stopped", "Stopped"), ("Completed", "Completed")):
        run.apply(_executor_view(status, secondary, "Stopped by request" if status == "Stopped" else None))
        record = run.record
        assert (record.training_job_status, record.secondary_status) == ("Failed", "Failed")
        assert record.failure_reason == HOST_FAILURE_REASON
        assert record.failure_reason.startswith("InternalServerError: ")
        assert [t["Status"] for t in record.secondary_status_transitions] == [
            "Starting",
            "Training",
            "Failed",
        ]
        assert "EndTime" in record.secondary_status_transitions[1]
