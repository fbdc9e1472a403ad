"""SageMaker's stop signal on the test endpoint: SIGTERM to each host's entrypoint (PID 1), SIGKILL
after the grace period (3 s in tests: ``ADT_STOP_GRACE_SECONDS``, tests/conftest.py).

The script (stop_scripts/steps.py) saves a checkpoint when SIGTERM reaches it. AWS's toolkit does not
forward the signal (sagemaker-training-toolkit #125), so in plain script mode the handler never
fires and the job is SIGKILLed at the end of the grace; the launcher strategy and the toolkit shim
(``stopping.forward_sigterm``) forward it, and the checkpoint saved at the signal is in S3.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from airflow_dist_training.operators.training import DistributedTrainingOperator
from airflow_dist_training.sagemaker.request import plan_training_job
from airflow_dist_training.spec.training import TrainingJobSpec

from .conftest import BUCKET, REPO

sys.path.insert(0, str(REPO / "tests" / "integration" / "training"))
from fake_sagemaker_training import make_context

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("sagemaker-emulator")]
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"
SCRIPTS = Path(__file__).parent / "stop_scripts"
GRACE = 3.0  # tests/conftest.py: ADT_STOP_GRACE_SECONDS


def spec(name: str, strategy: str, *, forward: bool = False, **overrides: Any) -> dict[str, Any]:
    distribution: dict[str, Any] = {"strategy": strategy}
    if strategy == "launcher":
        distribution.update(launcher="torchrun", processes_per_host=1)
    data: dict[str, Any] = {
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
    data.update(overrides)
    return data


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


def test_spot_interruption_with_forwarding_resumes_from_the_step_saved_at_the_signal(
    endpoint: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    name = "spot-forward"
    # no periodic checkpoint within the run: without the one saved at the signal it would restart at 0
    data = spec(
        name,
        "launcher",
        hyperparameters={"steps": 80, "every": 100000},
        spot={"enabled": True, "max_wait_seconds": 1200},
    )
    op = DistributedTrainingOperator(
        task_id="train", spec=data, backend="sagemaker", aws_conn_id=None, region_name="us-east-1",
        poll_interval=0.5, deferrable=False, checkpoint_resume="fresh",
    )  # fmt: skip
    sm = endpoint.client("sagemaker")
    interrupted: list[str] = []

    def interrupt_while_training() -> None:
        wait_for(lambda: bool(sm.list_training_jobs()["TrainingJobSummaries"]), 60)
        first = sm.list_training_jobs()["TrainingJobSummaries"][0]["TrainingJobName"]
        wait_for(lambda: training(endpoint, first))
        endpoint.inject("spot_interruption", job_name=first)
        interrupted.append(first)

    killer = threading.Thread(target=interrupt_while_training, daemon=True)
    killer.start()
    result = op.execute(make_context("run-spot-forward"))
    killer.join(5)
    assert interrupted, "the spot interruption was never injected"
    first = sm.describe_training_job(TrainingJobName=interrupted[0])
    assert (first["TrainingJobStatus"], first["SecondaryStatus"]) == ("Stopped", "MaxWaitTimeExceeded")
    step = saved_step(lines_of(endpoint, interrupted[0]))
    assert step is not None and 10 <= step < 80
    assert result["job_name"] != interrupted[0] and result["status"] == "Completed"
    assert any(f"resumed from step {step}" in line for line in lines_of(endpoint, result["job_name"]))
    # the task's log names the step the run's next job resumes from
    assert f"The job resumes from step {step}" in capfd.readouterr().out
