"""Emulator pieces that need no server: paths, the /opt/ml mapping, log stream naming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_dist_training.emulator.logs import JobLogs
from airflow_dist_training.emulator.processing import ProcessingRun
from airflow_dist_training.emulator.server import Emulator


def test_a_relative_root_is_made_absolute(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    assert Emulator(root=".adt-demo/emulator").root == tmp_path / ".adt-demo" / "emulator"


def test_opt_ml_paths_map_once_into_the_job_folder(tmp_path: Path) -> None:
    run = ProcessingRun(
        record=object(), request={"ProcessingJobName": "p"}, job_dir=tmp_path / "p", logs=None
    )  # type: ignore[arg-type]
    base = tmp_path / "p" / "opt" / "ml"
    assert run.local("/opt/ml/processing/input/code/x.py") == f"{base}/processing/input/code/x.py"
    assert run.local("--out=/opt/ml/processing/out") == f"--out={base}/processing/out"
    assert run.local("/opt/mlx") == "/opt/mlx"


class _Logs:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, list[str]]] = []

    def create_log_group(self, **_: Any) -> None: ...

    def create_log_stream(self, **_: Any) -> None: ...

    def put_log_events(self, logGroupName: str, logStreamName: str, logEvents: list[dict[str, Any]]) -> None:
        self.events.append((logGroupName, logStreamName, [e["message"] for e in logEvents]))


def test_one_stream_per_host_named_like_sagemaker() -> None:
    client = _Logs()
    logs = JobLogs(client, "/aws/sagemaker/TrainingJobs", "job-1")
    logs.add("[algo-2] epoch=0 loss=1.0")
    logs.add("[local] preparing hosts")  # executor lines go to the first host's stream
    logs.flush()
    streams = {stream: msgs for _, stream, msgs in client.events}
    assert streams == {
        f"job-1/algo-2-{logs.epoch}": ["epoch=0 loss=1.0"],
        f"job-1/algo-1-{logs.epoch}": ["[local] preparing hosts"],
    }
