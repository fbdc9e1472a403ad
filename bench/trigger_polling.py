"""API calls per job-hour and triggerer CPU: TrainingJobTrigger (shared poller) vs SageMakerTrigger,
and TuningJobTrigger (the shared poller of tuning jobs, after) vs its former one describe per poll
(``SageMakerJobKindTrigger`` of kind ``tuning``, before): calls per tuning-job-hour.

Both run side by side in one invocation against the same moto server, which runs in a
**separate process** so that the CPU time measured here (``time.process_time()`` of this
process: event loop, aiobotocore, executor threads) is the triggerer's alone. The server counts
requests per action, and drives job state: all jobs start ``InProgress/Training``; each job moves
to ``Uploading`` and then ``Completed`` at a scripted time spread over the run.

Time is compressed: both triggers poll every ``--poll`` seconds instead of 30 s, and per-hour figures
are scaled by ``30 / poll`` (so "calls per job-hour" means "at a 30 s poll interval").

A tuning job's state moves as its training jobs start and end: the server changes its
``TrainingJobStatusCounters`` (and ``LastModifiedTime``) twice per training job, four training jobs
spread over its run, then completes it.

Usage::

    .venv/bin/python bench/trigger_polling.py                  # 100 and 1,000 jobs, 100 tuning jobs
    .venv/bin/python bench/trigger_polling.py --jobs 100 --tuning-jobs 100 --intervals 20   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"
REAL_INTERVAL = 30.0


# ---------------------------------------------------------------------------------------------------
# Server side (child process): moto + request counting + scripted job state
# ---------------------------------------------------------------------------------------------------
def serve(port: int) -> None:
    import boto3
    from moto.backends import get_backend
    from moto.core.responses import BaseResponse
    from moto.core.utils import utcnow
    from moto.server import ThreadedMotoServer

    logging.disable(logging.CRITICAL)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    completions: dict[str, float] = {}
    original = BaseResponse.call_action

    def call_action(resp: Any) -> Any:
        with lock:
            counts[f"{type(resp).__name__.removesuffix('Response')}.{resp._get_action()}"] += 1
        return original(resp)

    BaseResponse.call_action = call_action  # type: ignore[method-assign]
    sm = boto3.client("sagemaker", endpoint_url=endpoint, region_name=REGION)

    def backend() -> Any:
        return get_backend("sagemaker")[ACCOUNT][REGION]

    def set_state(name: str, status: str, secondary: str) -> None:
        if name.startswith("tune-"):
            set_tuning_state(name, status, secondary)
            return
        job = backend().training_jobs[name]
        now = utcnow()
        job.secondary_status_transitions.append({"Status": secondary, "StartTime": now})
        job.training_job_status, job.secondary_status, job.last_modified_time = status, secondary, now
        if status == "Completed":
            job.training_end_time = now
            completions[name] = time.time()

    def set_tuning_state(name: str, status: str, progress: str) -> None:
        """``progress``: "<completed>/<in progress>" training jobs."""
        job = backend().hyper_parameter_tuning_jobs[name]
        done, running = (int(n) for n in progress.split("/"))
        job.training_job_status_counters = {
            **job.training_job_status_counters, "Completed": done, "InProgress": running
        }
        job.hyper_parameter_tuning_job_status, job.last_modified_time = status, utcnow()
        if status == "Completed":
            completions[name] = time.time()

    def create_tuning(name: str) -> None:
        definition = {
            "AlgorithmSpecification": {"TrainingImage": "img:latest", "TrainingInputMode": "File"},
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
            "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
            "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        }
        sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName=name,
            HyperParameterTuningJobConfig={
                "Strategy": "Random",
                "ResourceLimits": {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 1},
            },
            TrainingJobDefinition=definition,
        )
        set_tuning_state(name, "InProgress", "0/1")

    def create(name: str) -> None:
        if name.startswith("tune-"):
            create_tuning(name)
            return
        sm.create_training_job(
            TrainingJobName=name,
            AlgorithmSpecification={"TrainingImage": "img:latest", "TrainingInputMode": "File"},
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole",
            OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
            ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 50},
            StoppingCondition={"MaxRuntimeInSeconds": 86400},
        )
        set_state(name, "InProgress", "Training")

    def run_schedule(t0: float, events: list[list[Any]]) -> None:
        for at, name, status, secondary in sorted(events):
            delay = t0 + at - time.time()
            if delay > 0:
                time.sleep(delay)
            set_state(name, status, secondary)

    print(json.dumps({"ready": endpoint}), flush=True)
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg["cmd"]
        reply: dict[str, Any] = {"ok": True}
        if cmd == "reset":
            import requests

            requests.post(f"{endpoint}/moto-api/reset", timeout=30)
            completions.clear()
        elif cmd == "create":
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(create, msg["names"]))
        elif cmd == "schedule":
            threading.Thread(target=run_schedule, args=(msg["t0"], msg["events"]), daemon=True).start()
        elif cmd == "counts":
            with lock:
                reply["counts"] = dict(counts)
                if msg.get("reset"):
                    counts.clear()
        elif cmd == "completions":
            reply["completions"] = dict(completions)
        elif cmd == "quit":
            break
        print(json.dumps(reply), flush=True)
    server.stop()


class Server:
    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.endpoint = json.loads(self.proc.stdout.readline())["ready"]

    def ask(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())  # type: ignore[no-any-return]

    def close(self) -> None:
        try:
            self.ask(cmd="quit")
        except Exception:
            pass
        self.proc.wait(timeout=30)


# ---------------------------------------------------------------------------------------------------
# Triggerer side (this process)
# ---------------------------------------------------------------------------------------------------
def make_trigger(impl: str, name: str, poll: float) -> Any:
    if impl == "tuning-before":  # what TuningJobTrigger was: one describe per poll (the generic trigger)
        from airflow_dist_training.triggers.processing import SageMakerJobKindTrigger

        return SageMakerJobKindTrigger(name, "tuning", aws_conn_id=None, region_name=REGION, poll_interval=poll)
    if impl == "tuning-after":
        from airflow_dist_training.triggers.tuning import TuningJobTrigger

        return TuningJobTrigger(name, aws_conn_id=None, region_name=REGION, poll_interval=poll)
    if impl == "ours":
        from airflow_dist_training.triggers.training import TrainingJobTrigger

        return TrainingJobTrigger(
            name, aws_conn_id=None, region_name=REGION, poll_interval=poll, stream_logs=False
        )
    from airflow.providers.amazon.aws.triggers.sagemaker import SageMakerTrigger

    return SageMakerTrigger(
        job_name=name,
        job_type="Training",
        waiter_delay=poll,  # type: ignore[arg-type]
        waiter_max_attempts=10**6,
        aws_conn_id=None,
        region_name=REGION,
    )


async def run_window(
    server: Server, impl: str, names: list[str], poll: float, events: list[list[Any]], window: float
) -> dict[str, Any]:
    """Start every trigger, wait until all are polling (warm-up), then measure one scripted window."""
    n = len(names)
    cpu_start = time.process_time()
    triggers = [make_trigger(impl, name, poll) for name in names]
    results: dict[str, float] = {}
    statuses: Counter[str] = Counter()

    async def one(t: Any) -> None:
        gen = t.run()
        try:
            event = await gen.__anext__()
        finally:
            await gen.aclose()
        results[t.job_name] = time.time()
        statuses[event.payload["status"]] += 1

    tasks = [asyncio.create_task(one(t)) for t in triggers]

    async def warmed_up() -> bool:
        if impl in ("amazon", "tuning-before"):
            counts = (await asyncio.to_thread(server.ask, cmd="counts"))["counts"]
            describe = "DescribeTrainingJob" if impl == "amazon" else "DescribeHyperParameterTuningJob"
            return int(counts.get(f"SageMaker.{describe}", 0)) >= n
        from airflow_dist_training.triggers.polling import get_poller

        poller = get_poller(None, REGION, "tuning" if impl == "tuning-after" else "training")
        return len(poller.watched_jobs) == n and all(s.key is not None for s in poller._jobs.values())

    while not await warmed_up():
        await asyncio.sleep(poll / 2)
    startup_cpu = time.process_time() - cpu_start
    await asyncio.to_thread(server.ask, cmd="counts", reset=True)
    cpu0, t0 = time.process_time(), time.time()
    await asyncio.to_thread(server.ask, cmd="schedule", t0=t0, events=events)
    await asyncio.wait(tasks, timeout=window)
    for task in tasks:  # jobs still running at the end of the window: stop watching them
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    cpu = time.process_time() - cpu0
    t_end = t0 + window
    ends = {name: results.get(name, t_end) for name in names}
    return {"t0": t0, "ends": ends, "statuses": dict(statuses), "cpu": cpu, "startup_cpu": startup_cpu}


def run_one(
    server: Server, impl: str, n: int, poll: float, intervals: int, mean_job_hours: float, seed: int
) -> dict[str, Any]:
    server.ask(cmd="reset")
    tuning = impl.startswith("tuning")
    names = [f"{'tune' if tuning else 'bench'}-{n}-{i:04d}" for i in range(n)]
    server.ask(cmd="create", names=names)
    rng = random.Random(seed)
    window = intervals * poll
    # Steady fleet: each job's remaining run time is uniform in [0, 2 * mean] (real hours), so about
    # window / (2 * mean) of the jobs finish inside the window; the others are still running at its end.
    compress = poll / REAL_INTERVAL
    events: list[list[Any]] = []
    for name in names:
        done_at = rng.uniform(0, 2 * mean_job_hours * 3600 * compress)
        if tuning:  # its four training jobs, one after the other: a change as each ends
            for k in (1, 2, 3):
                if done_at * k / 4 < window - 2 * poll:
                    events.append([done_at * k / 4, name, "InProgress", f"{k}/1"])
            if done_at < window - 2 * poll:
                events.append([done_at, name, "Completed", "4/0"])
        elif done_at < window - 2 * poll:
            events.append([max(0.0, done_at - 2 * poll), name, "InProgress", "Uploading"])
            events.append([done_at, name, "Completed", "Completed"])
    out = asyncio.run(run_window(server, impl, names, poll, events, window))
    counts = server.ask(cmd="counts", reset=True)["counts"]
    completions = server.ask(cmd="completions")["completions"]
    t0, ends = out["t0"], out["ends"]
    sm_calls = sum(v for k, v in counts.items() if k.startswith("SageMaker."))
    watched = sum(end - t0 for end in ends.values())  # compressed job-seconds in the window
    real_job_hours = watched * (REAL_INTERVAL / poll) / 3600
    latencies = sorted(ends[nm] - completions[nm] for nm in names if nm in completions)
    # The floor for a shared list-based poller: one ListTrainingJobs page per 100 watched jobs per
    # interval (moto pages through every job whatever the filter; on AWS the LastModifiedTimeAfter
    # filter makes it ~one page) plus one DescribeTrainingJob per finished job.
    # A tuning watch wants the best job so far: one describe per change of its counters, too.
    floor_calls = intervals * -(-n // 100) + (len(events) if tuning else len(completions))
    # SageMakerTrigger by design: one describe per watched job per interval (what it sends when the
    # box keeps up; on a loaded box it falls behind and the measured figure drops with its latency).
    design_calls = sum(min(intervals, (end - t0) / poll) for end in out["ends"].values())
    return {
        "impl": impl,
        "jobs": n,
        "poll": poll,
        "calls": sm_calls,
        "by_action": {k: v for k, v in sorted(counts.items()) if k.startswith("SageMaker.")},
        "calls_per_job_hour": sm_calls / real_job_hours,
        "floor_per_job_hour": floor_calls / real_job_hours,
        "design_per_job_hour": design_calls / real_job_hours,
        "cpu_s": out["cpu"],
        "startup_cpu_s": out["startup_cpu"],
        "cpu_per_job_hour_ms": 1000 * out["cpu"] / real_job_hours,
        "job_hours": real_job_hours,
        "lat_mean": statistics.mean(latencies) / poll,
        "lat_p95": latencies[int(0.95 * (len(latencies) - 1))] / poll,
        "lat_max": latencies[-1] / poll,
        "statuses": out["statuses"],
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, nargs="*", default=[100, 1000], help="training jobs (none: skip)")
    parser.add_argument(
        "--poll",
        type=float,
        nargs="+",
        default=None,
        help="compressed poll interval per --jobs value (default: 0.5 s for <=100 jobs, else 3 s, "
        "so moto can serve the baseline's describe rate)",
    )
    parser.add_argument("--intervals", type=int, default=60, help="measured window, in poll intervals")
    parser.add_argument(
        "--mean-job-hours",
        type=float,
        default=2.0,
        help="mean remaining run time of a watched job (real hours)",
    )
    parser.add_argument(
        "--tuning-jobs", type=int, nargs="*", default=[100], help="tuning jobs watched at once (none: skip)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs")
    args = parser.parse_args()
    if args.quick:
        # short jobs, so that some finish inside the short window (the latency figures need one)
        args.jobs, args.poll, args.intervals, args.mean_job_hours = [10], [0.5], 10, 0.02
        args.tuning_jobs = [10]
    if args.serve:
        serve(args.serve)
        return

    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="adt-bench-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    # Both triggers log every poll; keep log formatting/I-O out of the CPU figures.
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    os.environ.pop("AWS_PROFILE", None)
    polls = args.poll or [0.5 if n <= 100 else 3.0 for n in args.jobs]
    server = Server()
    os.environ["AWS_ENDPOINT_URL"] = server.endpoint
    import airflow.triggers.base  # noqa: F401  (configure airflow logging first, then quieten it)

    logging.disable(logging.INFO)
    rows = []
    try:
        for n, poll in zip(args.jobs, polls, strict=False):
            for impl in ("amazon", "ours"):
                row = run_one(server, impl, n, poll, args.intervals, args.mean_job_hours, args.seed)
                rows.append(row)
                print(
                    f"  {impl:6s} {n:5d} jobs: {row['calls']:6d} SageMaker calls {row['by_action']}, "
                    f"cpu {row['cpu_s']:.1f}s (+{row['startup_cpu_s']:.1f}s start-up), "
                    f"{row['job_hours']:.0f} job-hours, statuses {row['statuses']}, maxrss {row['maxrss_mb']:.0f} MB",
                    file=sys.stderr,
                    flush=True,
                )
        for n in args.tuning_jobs:
            for impl in ("tuning-before", "tuning-after"):
                row = run_one(server, impl, n, 0.5 if n <= 100 else 3.0, args.intervals, args.mean_job_hours, args.seed)
                rows.append(row)
                print(
                    f"  {impl:13s} {n:5d} tuning jobs: {row['calls']:6d} SageMaker calls {row['by_action']}, "
                    f"cpu {row['cpu_s']:.1f}s, statuses {row['statuses']}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        server.close()

    if args.jobs:  # the training triggers' tables
        print()
        print(
            f"API calls and triggerer CPU per job-hour (scaled to a {REAL_INTERVAL:.0f} s poll interval; "
            f"window {args.intervals} intervals, mean remaining job time {args.mean_job_hours} h)"
        )
        header = (
            "| jobs | poll (compressed) | trigger | SageMaker calls / job-hour | floor (calls / job-hour) | "
            "CPU ms / job-hour | start-up CPU s | detection latency mean / p95 / max (x poll interval) |"
        )
        print(header)
        print("|---|---|---|---|---|---|---|---|")
        for r in (r for r in rows if r["impl"] in ("amazon", "ours")):
            print(
                f"| {r['jobs']} | {r['poll']} s | {'SageMakerTrigger (amazon)' if r['impl'] == 'amazon' else 'TrainingJobTrigger (ours)'} "
                f"| {r['calls_per_job_hour']:.2f} | {r['floor_per_job_hour']:.2f} "
                f"| {r['cpu_per_job_hour_ms']:.1f} | {r['startup_cpu_s']:.1f} "
                f"| {r['lat_mean']:.2f} / {r['lat_p95']:.2f} / {r['lat_max']:.2f} |"
            )
        print()
        print(
            "| jobs | calls ratio (amazon measured / ours) | calls ratio (amazon by design / ours) "
            "| ours / floor | CPU ratio (amazon / ours) |"
        )
        print("|---|---|---|---|---|")
        for n in args.jobs:
            a = next(r for r in rows if r["jobs"] == n and r["impl"] == "amazon")
            o = next(r for r in rows if r["jobs"] == n and r["impl"] == "ours")
            print(
                f"| {n} | {a['calls_per_job_hour'] / o['calls_per_job_hour']:.1f}x "
                f"| {a['design_per_job_hour'] / o['calls_per_job_hour']:.1f}x "
                f"| {o['calls_per_job_hour'] / o['floor_per_job_hour']:.2f} "
                f"| {a['cpu_per_job_hour_ms'] / o['cpu_per_job_hour_ms']:.1f}x |"
            )
        for n in args.jobs:
            a = next(r for r in rows if r["jobs"] == n and r["impl"] == "amazon")
            o = next(r for r in rows if r["jobs"] == n and r["impl"] == "ours")
            print(f"ratio calls per job-hour amazon/ours = {a['calls_per_job_hour'] / o['calls_per_job_hour']:.1f}x ({n} jobs)")
    if args.tuning_jobs:
        print()
        print(
            "Tuning jobs: calls per tuning-job-hour (same scaling), before (one describe per tuning job "
            "per poll) and after (the shared poller of tuning jobs)"
        )
        print(
            "| tuning jobs | before: calls / tuning-job-hour (measured; by design) | after: calls / tuning-job-hour "
            "| after: floor | calls ratio before / after (measured; by design) | CPU ms / tuning-job-hour before / after "
            "| detection latency mean before / after (x poll interval) |"
        )
        print("|---|---|---|---|---|---|---|")
        for n in args.tuning_jobs:
            b = next(r for r in rows if r["jobs"] == n and r["impl"] == "tuning-before")
            a = next(r for r in rows if r["jobs"] == n and r["impl"] == "tuning-after")
            print(
                f"| {n} | {b['calls_per_job_hour']:.2f}; {b['design_per_job_hour']:.2f} | {a['calls_per_job_hour']:.2f} "
                f"| {a['floor_per_job_hour']:.2f} | {b['calls_per_job_hour'] / a['calls_per_job_hour']:.1f}x; "
                f"{b['design_per_job_hour'] / a['calls_per_job_hour']:.1f}x "
                f"| {b['cpu_per_job_hour_ms']:.1f} / {a['cpu_per_job_hour_ms']:.1f} "
                f"| {b['lat_mean']:.2f} / {a['lat_mean']:.2f} |"
            )
            print(
                f"ratio calls per tuning-job-hour before/after = "
                f"{b['calls_per_job_hour'] / a['calls_per_job_hour']:.1f}x ({n} tuning jobs)"
            )
    print()
    print("calls by action:", json.dumps({f"{r['impl']}-{r['jobs']}": r["by_action"] for r in rows}))


if __name__ == "__main__":
    main()
