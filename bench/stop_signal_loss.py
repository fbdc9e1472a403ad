"""Benchmark: training steps lost per spot interruption, with and without SIGTERM forwarding.

A job checkpoints every N steps (tests/integration/emulator/stop_scripts/steps.py: a step every
50 ms, a checkpoint every ``--every`` steps and one when SIGTERM reaches it). It runs on the SageMaker
test endpoint and is interrupted (the ``spot_interruption`` fault: SIGTERM to each host's PID 1,
SIGKILL after the grace) at points spread over the checkpoint interval. Steps lost = the last step
the job trained (it trains on through the grace when the signal does not reach it) - the newest
checkpoint step in S3 (what the next generation resumes from).

Anchor: AWS's toolkit in script mode (the script never sees SIGTERM: it trains on until SIGKILL and
loses everything since its last periodic checkpoint). Side by side: the toolkit under the shim
(``stopping.forward_sigterm``) and the launcher strategy, which forward it.

    .venv/bin/python bench/stop_signal_loss.py                       # N=40, 3 interruptions per mode
    .venv/bin/python bench/stop_signal_loss.py --every 100 --interruptions 5 --grace 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BUCKET = "bench-stop"
SCRIPTS = REPO / "tests" / "integration" / "emulator" / "stop_scripts"
STEP_SECONDS = 0.05
MODES = {  # name -> (strategy, forward_sigterm); the first is the anchor
    "toolkit (anchor)": ("none", False),
    "toolkit + shim": ("none", True),
    "launcher": ("launcher", False),
}


def spec(name: str, strategy: str, forward: bool, every: int) -> dict[str, Any]:
    distribution: dict[str, Any] = {"strategy": strategy}
    if strategy == "launcher":
        distribution.update(launcher="torchrun", processes_per_host=1)
    return {
        "name": name,
        "role_arn": "arn:aws:iam::123456789012:role/SageMakerTrainingRole",
        "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
        "source": {
            "entry_point": "steps.py",
            "source_dir": str(SCRIPTS),
            "dependencies": [str(REPO / "airflow_dist_training" / "checkpointing.py")],
        },
        "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
        "distribution": distribution,
        "hyperparameters": {"every": every, "step-seconds": STEP_SECONDS},
        "output": {"s3_path": f"s3://{BUCKET}/models"},
        "checkpoint": {"s3_uri": f"s3://{BUCKET}/checkpoints/{name}"},
        "spot": {"enabled": True, "max_wait_seconds": 1200},
        "stopping": {"max_runtime_seconds": 600, "forward_sigterm": forward},
    }


def wait_for(predicate: Callable[[], bool], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the job did not get there in time")
        time.sleep(0.1)


def interrupted_job(endpoint: Any, name: str, data: dict[str, Any], at_step: int) -> tuple[int, int, int]:
    """Run one job, interrupt it at ``at_step``; (step at the interruption, last step, kept step)."""
    from airflow_dist_training.hooks.training import SageMakerTrainingHook
    from airflow_dist_training.sagemaker.request import plan_training_job
    from airflow_dist_training.spec.training import TrainingJobSpec

    plan = plan_training_job(TrainingJobSpec.model_validate(data), job_name=name, region="us-east-1")
    SageMakerTrainingHook(aws_conn_id=None, region_name="us-east-1").put_uploads(plan.uploads)
    sm, s3, logs = endpoint.client("sagemaker"), endpoint.client("s3"), endpoint.client("logs")

    def steps() -> list[int]:
        group = "/aws/sagemaker/TrainingJobs"
        streams = logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=f"{name}/")["logStreams"]
        events = [
            e["message"]
            for s in streams
            for e in logs.get_log_events(
                logGroupName=group, logStreamName=s["logStreamName"], startFromHead=True
            )["events"]
        ]
        return [int(m.group(1)) for line in events if (m := re.search(r"\bstep (\d+)$", line))]

    sm.create_training_job(**plan.request)
    wait_for(lambda: max(steps(), default=0) >= at_step)
    signalled = max(steps())
    endpoint.inject("spot_interruption", job_name=name)
    wait_for(lambda: sm.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] == "Stopped")
    time.sleep(0.5)  # the last log lines
    keys = [
        o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"checkpoints/{name}/").get("Contents", [])
    ]
    kept = [int(m.group(1)) for k in keys if (m := re.search(r"step-(\d+)/_MANIFEST\.json$", k))]
    return signalled, max(steps()), max(kept, default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=40, help="checkpoint every N steps")
    parser.add_argument("--interruptions", type=int, default=3, help="per mode")
    parser.add_argument("--grace", type=float, default=3.0, help="SIGTERM-to-SIGKILL seconds (AWS: 120)")
    parser.add_argument("--quick", action="store_true", help="one interruption per mode (the suite's smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.interruptions = 1
    os.environ["ADT_STOP_GRACE_SECONDS"] = str(args.grace)
    from airflow_dist_training.emulator.pytest_plugin import EmulatorProcess

    # interruption points spread over the second checkpoint interval (the first is warm-up)
    points = [args.every + 1 + (i * args.every) // args.interruptions for i in range(args.interruptions)]
    with tempfile.TemporaryDirectory(prefix="adt-bench-stop-") as tmp:
        endpoint = EmulatorProcess(Path(tmp))
        os.environ.update(
            AWS_ENDPOINT_URL=endpoint.endpoint,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
        )
        try:
            endpoint.client("s3").create_bucket(Bucket=BUCKET)
            results: dict[str, list[tuple[int, int, int]]] = {}
            for mode, (strategy, forward) in MODES.items():
                for i, point in enumerate(points):
                    name = f"{strategy}-{'fwd' if forward else 'plain'}-{i}"
                    run = interrupted_job(endpoint, name, spec(name, strategy, forward, args.every), point)
                    results.setdefault(mode, []).append(run)
                    print(
                        f"  {mode:18} signalled at step {run[0]:4}, trained to {run[1]:4}, kept {run[2]:4}",
                        flush=True,
                    )
        finally:
            endpoint.stop()
    print(
        f"\nSteps lost per interruption: checkpoint every {args.every} steps, a step every "
        f"{STEP_SECONDS * 1000:.0f} ms, grace {args.grace:g} s ({args.grace / STEP_SECONDS:.0f} steps)"
    )
    anchor = statistics.mean(last - kept for _s, last, kept in results[next(iter(MODES))])
    print(f"{'mode':18} {'steps lost (mean)':>18} {'per interruption':>17} {'vs anchor':>10}")
    for mode, runs in results.items():
        lost = [last - kept for _s, last, kept in runs]
        print(f"{mode:18} {statistics.mean(lost):18.1f} {lost!s:>17} {statistics.mean(lost) / anchor:9.2f}x")
    forwarded = statistics.mean(last - kept for _s, last, kept in results[list(MODES)[-1]])
    print(f"ratio steps lost per interruption, {list(MODES)[-1]}/{next(iter(MODES))} = {forwarded / anchor:.2f}x")


if __name__ == "__main__":
    main()
