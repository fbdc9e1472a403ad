"""SageMaker's stop signal on the test endpoint: SIGTERM to each host's entrypoint (PID 1), SIGKILL
after the grace period (3 s in tests: ``ADT_STOP_GRACE_SECONDS``, tests/conftest.py).

The script (stop_scripts/steps.py) saves a checkpoint when SIGTERM reaches it. AWS's toolkit does not
forward the signal (sagemaker-training-toolkit #125), so in plain script mode the handler never
fires and the job is SIGKILLed at the end of the grace; the launcher strategy and the toolkit shim
(``stopping.forward_sigterm``) forward it, and the checkpoint saved at the signal is in S3.

A spot interruption of the shipped retraining DAG's job, and the run's next job resuming from the
step saved at the signal: test_dags_on_emulator.py.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.training import TrainingJobSpec

from .conftest import BUCKET, REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
SCRIPTS = Path(__file__).parent / "stop_scripts"
GRACE = 3.0  # tests/conftest.py: ADT_STOP_GRACE_SECONDS


def spec(name: str, strategy: str, *, forward: bool = False) -> dict[str, Any]:
    distribution: dict[str, Any] = {"strategy": strategy}
    if strategy == "launcher":
        distribution.update(launcher="torchrun", processes_per_host=1)
    return {
        "name": name,
        "role_arn": ROLE,
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {
            "entry_point": "steps.py",
            "source_dir": str(SCRIPTS),
            "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
        },
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": distribution,
        "output": {"s3_path": f"s3://{BUCKET}/models"},
        "checkpoint": {"s3_uri": f"s3://{BUCKET}/checkpoints/{name}"},
        "stopping": {"max_runtime_seconds": 600, "forward_sigterm": forward},
    }


@pytest.fixture
def endpoint(sagemaker_endpoint: Any) -> Any:
    sagemaker_endpoint.client("s3").create_bucket(Bucket=BUCKET)
    return sagemaker_endpoint


def lines_of(endpoint: Any, job: str) -> list[str]:
    logs = endpoint.client("logs")
    group = "/aws/sagemaker/TrainingJobs"
    streams = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=f"{job}/")["logStreams"]
    return [
        e["message"]
        for s in streams
        for e in logs.get_log_events(
            logGroupName=group, logStreamName=s["logStreamName"], startFromHead=True
        )["events"]
    ]


def wait_for(predicate: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def training(endpoint: Any, job: str) -> bool:
    return any(re.search(r"\bstep [1-9]\d*0\b", line) for line in lines_of(endpoint, job))


def checkpoint_steps(endpoint: Any, name: str) -> list[int]:
    objects = endpoint.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=f"checkpoints/{name}/")
    keys = [o["Key"] for o in objects.get("Contents", [])]
    return sorted(int(m.group(1)) for k in keys if (m := re.search(r"step-(\d+)/_MANIFEST\.json$", k)))


def stop_while_training(endpoint: Any, data: dict[str, Any]) -> tuple[dict[str, Any], float, list[str]]:
    """Create the job, stop it once it trains; its description, the stop's duration, its log lines."""
    from airflow_dist_training.hooks.training import SageMakerTrainingHook

    job = f"{data['name']}-1"
    plan = plan_training_job(TrainingJobSpec.model_validate(data), job_name=job, region="us-east-1")
    SageMakerTrainingHook(aws_conn_id=None, region_name="us-east-1").put_uploads(plan.uploads)
    sm = endpoint.client("sagemaker")
    sm.create_training_job(**plan.request)
    wait_for(lambda: training(endpoint, job))
    started = time.monotonic()
    sm.stop_training_job(TrainingJobName=job)
    wait_for(lambda: sm.describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "Stopped", 60)
    took = time.monotonic() - started
    time.sleep(0.5)  # the last log lines
    return sm.describe_training_job(TrainingJobName=job), took, lines_of(endpoint, job)


def saved_step(lines: list[str]) -> int | None:
    found = [int(m.group(1)) for line in lines if (m := re.search(r"saved step (\d+) on SIGTERM", line))]
    return found[0] if found else None


def test_toolkit_script_mode_does_not_pass_sigterm_on_and_the_job_is_killed_after_the_grace(
    endpoint: Any,
) -> None:
    desc, took, lines = stop_while_training(endpoint, spec("stop-toolkit", "none"))
    assert desc["TrainingJobStatus"] == "Stopped"
    assert saved_step(lines) is None, lines[-20:]
    assert checkpoint_steps(endpoint, "stop-toolkit") == []
    assert took >= GRACE, f"stopped in {took:.1f} s: before the SIGKILL at the end of the grace"
    # the executor's account of the stop is in the endpoint's log, not the job's (SageMaker shows none)
    endpoint_log = (endpoint.root / "emulator.log").read_text(errors="replace")
    assert "stop: SIGTERM to algo-1's entrypoint (ignored: no SIGTERM handler in PID 1" in endpoint_log
    assert not any("[local]" in line for line in lines), lines[-20:]


@pytest.mark.parametrize(
    ("strategy", "forward"), [("launcher", False), ("none", True)], ids=["launcher", "shim"]
)
def test_a_forwarded_sigterm_saves_a_checkpoint_that_reaches_s3(
    endpoint: Any, strategy: str, forward: bool
) -> None:
    name = f"stop-{strategy}"
    desc, took, lines = stop_while_training(endpoint, spec(name, strategy, forward=forward))
    assert desc["TrainingJobStatus"] == "Stopped"
    step = saved_step(lines)
    assert step is not None and step >= 10, lines[-20:]
    assert checkpoint_steps(endpoint, name) == [step]
    assert took < GRACE + 2, f"the script saved and exited, yet the stop took {took:.1f} s"
    # what a stopped job saved in its window is kept: the model artifact is uploaded too
    model = desc["ModelArtifacts"]["S3ModelArtifacts"].split(f"s3://{BUCKET}/", 1)[1]
    endpoint.client("s3").head_object(Bucket=BUCKET, Key=model)
