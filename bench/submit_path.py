"""Worker CPU of one deferrable training task's submit path, ours vs the Amazon provider's operator.

What every deferred training task costs its worker before it hands the wait to the triggerer: the
import of the operator's modules (the task process has already imported ``airflow.sdk``), then
``execute`` up to ``TaskDeferred``. Ours: load and validate the spec, plan the request, upload the
source archive, describe-before-create over the run's generations, create, describe, defer. The
anchor: ``SageMakerTrainingOperator(deferrable=True)`` with the same request written by hand (no
spec, no upload: the hand-written DAG uploads its code elsewhere), which describes, creates and defers.

Each sample is a fresh interpreter, ours and the anchor alternately, against one moto server. CPU
time (user + system of the process) is what competes with the supervisors' heartbeats on a loaded
worker, so it is the figure; wall time is printed beside it. ``--profile`` prints where ours goes.

With ``--capacity 16,32,48,64`` it then measures the stack's figure: the most deferred training tasks
the production-like stack holds at once before the scheduler misses a heartbeat
(``tests/e2e/prod/test_submit_capacity.py``: rounds of N concurrent runs through this submit path).

    .venv/bin/python bench/submit_path.py [--rounds 5] [--profile] [--capacity 16,32,48,64]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB_SOURCE = REPO / "tests" / "e2e" / "prod" / "dags" / "job"
BUCKET = "adt-bench-submit"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"

PRELUDE = """
import json, os, resource, sys, time
import airflow.sdk  # the task process has imported it already
from airflow.sdk import DAG, Param
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
class TI:
    run_id, map_index, dag_id, task_id, try_number, stats_tags = RUN_ID, -1, "bench", "train", 1, {}
    def xcom_push(self, key, value): pass
    def xcom_pull(self, *a, **k): return None
class Store(dict):
    def set(self, key, value, **_): self[key] = value
ctx = {"ti": TI(), "run_id": RUN_ID, "task_state_store": Store(), "params": {}}
"""

OURS = """
c0, t0 = cpu(), time.perf_counter()
from airflow_dist_training.operators.training import DistributedTrainingOperator
from airflow_dist_training.compat import TaskDeferred
c1, t1 = cpu(), time.perf_counter()
op = DistributedTrainingOperator(task_id="train", spec=SPEC, backend="sagemaker", aws_conn_id=None,
                                 region_name="us-east-1", deferrable=True, poll_interval=30)
try:
    op.execute(ctx)
except TaskDeferred:  # moto completes jobs at once: a describe that finds it done returns instead
    pass
c2, t2 = cpu(), time.perf_counter()
print(json.dumps({"import_cpu": c1 - c0, "execute_cpu": c2 - c1, "import_wall": t1 - t0, "execute_wall": t2 - t1}))
"""

ANCHOR = """
c0, t0 = cpu(), time.perf_counter()
from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
from airflow.exceptions import TaskDeferred
c1, t1 = cpu(), time.perf_counter()
config = dict(CONFIG, TrainingJobName="prod-bench-" + RUN_ID.replace("_", "-"))
op = SageMakerTrainingOperator(task_id="train", config=config, aws_conn_id=None, region_name="us-east-1",
                               deferrable=True, check_interval=30)
try:
    op.execute(ctx)
except TaskDeferred:  # moto completes jobs at once: a describe that finds it done returns instead
    pass
c2, t2 = cpu(), time.perf_counter()
print(json.dumps({"import_cpu": c1 - c0, "execute_cpu": c2 - c1, "import_wall": t1 - t0, "execute_wall": t2 - t1}))
"""

SPEC = {
    "name": "prod-bench",
    "role_arn": ROLE,
    "image": {"framework": "pytorch", "framework_version": "2.8.0", "py_version": "py312"},
    "source": {"entry_point": "train.py", "source_dir": str(JOB_SOURCE)},
    "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
    "hyperparameters": {"seconds": "20"},
    "output": {"s3_path": f"s3://{BUCKET}/models"},
}


def hand_written_config(image: str) -> dict[str, object]:
    """What a user writes for the Amazon operator: the same job, code already in S3."""
    return {
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "HyperParameters": {
            "seconds": "20",
            "sagemaker_program": "train.py",
            "sagemaker_submit_directory": f"s3://{BUCKET}/code/sourcedir.tar.gz",
            "sagemaker_region": "us-east-1",
        },
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/models"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sample(code: str, env: dict[str, str], run_id: str, profile: bool = False) -> dict[str, float]:
    script = (PRELUDE + code).replace("RUN_ID", repr(run_id))
    if profile:
        script = script.replace(
            "    op.execute(ctx)",
            "    import cProfile, pstats; prof = cProfile.Profile(); prof.runcall(op.execute, ctx)",
        ).replace(
            "c2, t2 = cpu()",
            "pstats.Stats(prof, stream=sys.stderr).sort_stats('cumtime').print_stats(45)\nc2, t2 = cpu()",
        )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"probe failed:\n{out.stderr[-4000:]}")
    if profile:
        print(out.stderr[out.stderr.find("Ordered by") :])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print cProfile of our execute once")
    parser.add_argument("--quick", action="store_true", help="one round (the suite's smoke run)")
    parser.add_argument("--capacity", metavar="SIZES", help="then the stack's capacity, rounds of these sizes")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / "moto_server"), "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            endpoint = f"http://127.0.0.1:{port}"
            env = {
                **os.environ,
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AIRFLOW_HOME": home,
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
            }
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            import boto3

            s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
            s3.create_bucket(Bucket=BUCKET)
            image = planned_image()
            ours_code = f"SPEC = {SPEC!r}\n" + OURS
            anchor_code = f"CONFIG = {hand_written_config(image)!r}\n" + ANCHOR
            if not args.quick:  # the smoke run measures nothing worth warming up for
                sample(ours_code, env, "warmup_ours")  # writes our bytecode caches, as a deployed wheel has them
                sample(anchor_code, env, "warmup_anchor")
            if args.profile:
                sample(ours_code, env, "profile_1", profile=True)
            ours: list[dict[str, float]] = []
            anchor: list[dict[str, float]] = []
            for i in range(rounds):
                ours.append(sample(ours_code, env, f"ours_{i}"))
                anchor.append(sample(anchor_code, env, f"anchor_{i}"))
        finally:
            server.kill()
            server.wait(10)

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print(f"submit path of one deferrable training task, medians of {rounds} rounds (fresh interpreter each)")
    print(f"{'':32} {'ours':>10} {'anchor':>10} {'ratio':>8}")
    for key in ("import_cpu", "execute_cpu", "import_wall", "execute_wall"):
        o, a = med(ours, key), med(anchor, key)
        print(f"{key:32} {o * 1000:9.0f}ms {a * 1000:9.0f}ms {o / a:7.2f}x")
    total_o = med(ours, "import_cpu") + med(ours, "execute_cpu")
    total_a = med(anchor, "import_cpu") + med(anchor, "execute_cpu")
    print(f"{'worker CPU per task (import+execute)':32} {total_o * 1000:9.0f}ms {total_a * 1000:9.0f}ms {total_o / total_a:7.2f}x")
    print(f"ratio worker CPU per deferred training task, ours/anchor = {total_o / total_a:.2f}x")
    if args.capacity:
        stack_capacity(args.capacity)


def stack_capacity(sizes: str) -> None:
    """Run the capacity rounds on the production-like stack and print each round and the figure."""
    env = {**os.environ, "ADT_PRODSTACK_CAPACITY": "1", "ADT_CAPACITY_SIZES": sizes}
    test = REPO / "tests" / "e2e" / "prod" / "test_submit_capacity.py"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(test), "-s", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith("capacity")))
    if done.returncode != 0:
        raise SystemExit(done.stdout[-4000:] + done.stderr[-2000:])


def planned_image() -> str:
    """The image our planner resolves for ``SPEC``, so that both sides send the same image."""
    from airflow_dist_training.sagemaker.request import plan_training_job
    from airflow_dist_training.spec.loading import load_spec

    planned = plan_training_job(load_spec(SPEC), job_name="prod-bench-x", region="us-east-1")
    return str(planned.request["AlgorithmSpecification"]["TrainingImage"])


if __name__ == "__main__":
    main()
