"""API calls per job-hour and triggerer CPU: TrainingJobTrigger (shared poller) vs SageMakerTrigger.

Both run side by side in one invocation against the same moto server, which runs in a
**separate process** so that the CPU time measured here (``time.process_time()`` of this
process: event loop, aiobotocore, executor threads) is the triggerer's alone. The server counts
requests per action, and drives job state: all jobs start ``InProgress/Training``; each job moves
to ``Uploading`` and then ``Completed`` at a scripted time spread over the run.

Time is compressed: both triggers poll every ``--poll`` seconds instead of 30 s, and per-hour figures
are scaled by ``30 / poll`` (so "calls per job-hour" means "at a 30 s poll interval").

Usage::

    .venv/bin/python bench/trigger_polling.py                  # 100 and 1,000 jobs
    .venv/bin/python bench/trigger_polling.py --jobs 100 --intervals 20   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
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
        job = backend().training_jobs[name]
        now = utcnow()
        job.secondary_status_transitions.append({"Status": secondary, "StartTime": now})
        job.training_job_status, job.secondary_status, job.last_modified_time = status, secondary, now
        if status == "Completed":
            job.training_end_time = now
            completions[name] = time.time()

    def create(name: str) -> None:
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
    if impl == "ours":
        from airflow_dist_training.triggers.training import TrainingJobTrigger

        return TrainingJobTrigger(name, aws_conn_id=None, region_name=REGION, poll_interval=poll, stream_logs=False)
    from airflow.providers.amazon.aws.triggers.sagemaker import SageMakerTrigger

    return SageMakerTrigger(
        job_name=name,
        job_type="Training",
        waiter_delay=poll,  # type: ignore[arg-type]
        waiter_max_attempts=10**6,
        aws_conn_id=None,
        region_name=REGION,
    )


async def watch_all(triggers: list[Any]) -> dict[str, tuple[float, float, str]]:
    """Run every trigger to its first event; returns name -> (start wall, event wall, status)."""
    out: dict[str, tuple[float, float, str]] = {}

    async def one(t: Any) -> None:
        start = time.time()
        gen = t.run()
        try:
            event = await gen.__anext__()
        finally:
            await gen.aclose()
        out[t.job_name] = (start, time.time(), event.payload["status"])

    await asyncio.gather(*(one(t) for t in triggers))
    return out


def run_one(server: Server, impl: str, n: int, poll: float, intervals: int, seed: int) -> dict[str, Any]:
    server.ask(cmd="reset")
    names = [f"bench-{n}-{i:04d}" for i in range(n)]
    server.ask(cmd="create", names=names)
    rng = random.Random(seed)
    duration = intervals * poll
    lead = 4 * poll  # give the triggerer time to start all triggers
    events: list[list[Any]] = []
    for name in names:
        done_at = lead + rng.uniform(0.2 * duration, duration)
        events.append([max(lead, done_at - 2 * poll), name, "InProgress", "Uploading"])
        events.append([done_at, name, "Completed", "Completed"])
    server.ask(cmd="counts", reset=True)
    triggers = [make_trigger(impl, name, poll) for name in names]
    cpu0, wall0 = time.process_time(), time.time()
    server.ask(cmd="schedule", t0=wall0, events=events)
    results = asyncio.run(watch_all(triggers))
    cpu, wall = time.process_time() - cpu0, time.time() - wall0
    counts = server.ask(cmd="counts", reset=True)["counts"]
    completions = server.ask(cmd="completions")["completions"]

    sm_calls = sum(v for k, v in counts.items() if k.startswith("SageMaker."))
    watched = sum(end - start for start, end, _ in results.values())  # compressed job-seconds
    real_job_hours = watched * (REAL_INTERVAL / poll) / 3600
    latencies = [results[nm][1] - completions[nm] for nm in names if nm in completions]
    statuses = Counter(s for _, _, s in results.values())
    return {
        "impl": impl,
        "jobs": n,
        "poll": poll,
        "calls": sm_calls,
        "by_action": {k: v for k, v in sorted(counts.items()) if k.startswith("SageMaker.")},
        "calls_per_job_hour": sm_calls / real_job_hours,
        "cpu_s": cpu,
        "cpu_per_job_hour_ms": 1000 * cpu / real_job_hours,
        "wall_s": wall,
        "lat_mean": statistics.mean(latencies) / poll,
        "lat_p95": sorted(latencies)[int(0.95 * (len(latencies) - 1))] / poll,
        "lat_max": max(latencies) / poll,
        "statuses": dict(statuses),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 1000])
    parser.add_argument(
        "--poll",
        type=float,
        nargs="+",
        default=None,
        help="compressed poll interval per --jobs value (default: 0.5 s for <=100 jobs, else 3 s, "
        "so moto can serve the baseline's describe rate)",
    )
    parser.add_argument("--intervals", type=int, default=30, help="run length in poll intervals")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="adt-bench-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    os.environ.pop("AWS_PROFILE", None)
    polls = args.poll or [0.5 if n <= 100 else 3.0 for n in args.jobs]
    server = Server()
    os.environ["AWS_ENDPOINT_URL"] = server.endpoint
    import airflow.triggers.base  # noqa: F401  (configure airflow logging first, then quieten it)

    logging.disable(logging.INFO)  # both triggers log every poll; keep log I/O out of the CPU figures
    rows = []
    try:
        for n, poll in zip(args.jobs, polls, strict=False):
            for impl in ("amazon", "ours"):
                row = run_one(server, impl, n, poll, args.intervals, args.seed)
                rows.append(row)
                print(
                    f"  {impl:6s} {n:5d} jobs: {row['calls']:6d} SageMaker calls {row['by_action']}, "
                    f"cpu {row['cpu_s']:.1f}s, wall {row['wall_s']:.1f}s, statuses {row['statuses']}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        server.close()

    print()
    print(f"API calls and triggerer CPU per job-hour (scaled to a {REAL_INTERVAL:.0f} s poll interval)")
    header = (
        "| jobs | poll (compressed) | trigger | SageMaker calls / job-hour | CPU ms / job-hour | "
        "detection latency mean / p95 / max (x poll interval) |"
    )
    print(header)
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['jobs']} | {r['poll']} s | {'SageMakerTrigger (amazon)' if r['impl'] == 'amazon' else 'TrainingJobTrigger (ours)'} "
            f"| {r['calls_per_job_hour']:.1f} | {r['cpu_per_job_hour_ms']:.1f} "
            f"| {r['lat_mean']:.2f} / {r['lat_p95']:.2f} / {r['lat_max']:.2f} |"
        )
    print()
    print("| jobs | calls ratio (amazon / ours) | CPU ratio (amazon / ours) |")
    print("|---|---|---|")
    for n in args.jobs:
        a = next(r for r in rows if r["jobs"] == n and r["impl"] == "amazon")
        o = next(r for r in rows if r["jobs"] == n and r["impl"] == "ours")
        print(
            f"| {n} | {a['calls_per_job_hour'] / o['calls_per_job_hour']:.1f}x "
            f"| {a['cpu_per_job_hour_ms'] / o['cpu_per_job_hour_ms']:.1f}x |"
        )
    print()
    print("calls by action:", json.dumps({f"{r['impl']}-{r['jobs']}": r["by_action"] for r in rows}))


if __name__ == "__main__":
    main()
