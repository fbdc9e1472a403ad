"""Crash-and-retry duplicates: ours vs the Amazon provider's SageMakerTrainingOperator.

Both run against the same moto server (in this process; CreateTrainingJob counted in the server,
duplicate names rejected as on AWS), each as a task of one DAG run through ``airflow tasks test``
(Airflow's task runner and metadata DB, see ``tests/integration/training/crash_driver.py``). For
each of N DAG runs a real forked process runs the task and is killed at a random point (SIGKILL a
random delay after the task starts running; for ours also ``os._exit`` at named points such as
between CreateTrainingJob and persisting the name), then the retry runs to the end. We count the
training jobs created per run: 1.0 is ideal; every extra job is a duplicate that bills in parallel.

    .venv/bin/python bench/crash_retry.py [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRAINING_TESTS = ROOT / "tests" / "integration" / "training"
sys.path.insert(0, str(TRAINING_TESTS))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: the suite checks the bench still runs")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1

    home = Path(tempfile.mkdtemp(prefix="adt-bench-crash-"))
    env_defaults = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for k, v in env_defaults.items():
        os.environ.setdefault(k, v)

    from fake_sagemaker_training import FakeTrainingLifecycle
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per moto request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
    fake = FakeTrainingLifecycle()
    fake.install()
    fake.complete_after = 2.0
    import boto3

    s3 = boto3.client("s3", region_name="us-east-1")
    for bucket in ("data-bucket", "out-bucket", "my-ml-bucket"):
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket="data-bucket", Key="train/part-0", Body=b"x")  # the provider HEADs inputs
    migrated_db = home / "airflow.db"
    subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        check=True,
        capture_output=True,
        env={**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{migrated_db}"},
    )
    results: dict[str, dict[str, float]] = {}
    try:
        for impl in ("ours", "amazon"):
            fake.creates.clear()
            with tempfile.TemporaryDirectory() as work:
                proc = subprocess.run(
                    [
                        sys.executable,
                        str(TRAINING_TESTS / "crash_driver.py"),
                        "--impl",
                        impl,
                        "--runs",
                        str(args.runs),
                        "--seed",
                        str(args.seed),
                        "--home",
                        str(Path(work) / "home"),
                        "--migrated-db",
                        str(migrated_db),
                    ],
                    capture_output=True,
                    text=True,
                    env=os.environ.copy(),
                    timeout=1800,
                )
            records = [
                json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")
            ]
            if proc.returncode != 0 or not records:
                raise SystemExit(
                    f"crash_driver.py --impl {impl} exited {proc.returncode} with {len(records)} result(s):\n"
                    + "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
                )
            per_run = [
                sum(n for name, n in fake.creates.items() if name.startswith(r["prefix"])) for r in records
            ]
            ok = sum(r["retry_ok"] for r in records)
            results[impl] = {
                "runs": len(records),
                "jobs_created": sum(per_run),
                "jobs_per_run": sum(per_run) / max(1, len(records)),
                "runs_with_duplicates": sum(1 for n in per_run if n > 1),
                "retries_succeeded": ok,
            }
    finally:
        fake.uninstall()
        server.stop()

    ours, amazon = results["ours"], results["amazon"]
    print(f"{'':28}{'ours':>12}{'amazon':>12}")
    for key in ("runs", "jobs_created", "jobs_per_run", "runs_with_duplicates", "retries_succeeded"):
        print(f"{key:28}{ours[key]:>12.2f}{amazon[key]:>12.2f}")
    dup_ours = ours["jobs_per_run"] - 1
    dup_amz = amazon["jobs_per_run"] - 1
    print(f"\njobs per run, amazon / ours: {amazon['jobs_per_run'] / ours['jobs_per_run']:.2f}x")
    print(f"ratio jobs per run amazon/ours = {amazon['jobs_per_run'] / ours['jobs_per_run']:.2f}x")
    print(f"duplicate jobs per run: ours {dup_ours:.2f}, amazon {dup_amz:.2f}")


if __name__ == "__main__":
    main()
